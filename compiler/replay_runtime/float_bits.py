"""MLIR text shared by the conversions on raw bits to narrower floats (`softfloat`'s f16,
`float8`'s 8-bit formats)."""

# In a function whose argument %f holds f32 bits and which defines %sign_mask, %smallest_normal
# (the target format's, as f32 bits) and %magic (the f32 whose ulp is the target's subnormal
# ulp): %f's %sign and magnitude %a, whether %a is below the target's normals (%is_small), and
# %small: %a as a target subnormal, rounded to nearest even by adding %magic in hardware.
SIGN_AND_SUBNORMAL = """\
  %sign = arith.andi %f, %sign_mask : i32
  %a = arith.xori %f, %sign : i32
  %is_small = arith.cmpi ult, %a, %smallest_normal : i32
  %a_float = arith.bitcast %a : i32 to f32
  %magic_float = arith.bitcast %magic : i32 to f32
  %sum = arith.addf %a_float, %magic_float : f32
  %sum_bits = arith.bitcast %sum : f32 to i32
  %small = arith.subi %sum_bits, %magic : i32
"""
