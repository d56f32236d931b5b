"""float8 conversions for the RefBackend: integer MLIR in the conversion runtime, and the
rewrite that calls it.

LLVM has no 8-bit float types: MLIR's LLVM lowering stores f8E4M3FN, f8E4M3FNUZ, f8E5M2
and f8E5M2FNUZ as i8, but has no lowering for `arith.extf` / `arith.truncf` to or from
them (the JIT fails with "missing LLVMTranslationDialectInterface ... arith.truncf").
Arithmetic on them is done in f32 (`arith-emulate-unsupported-floats` in
`pipelines.LINALG_TO_LLVM`), which leaves only those conversions; `expand_conversions`
then replaces each by a call of a conversion on raw bits, compiled once per process into
the conversion runtime (`softfloat.Runtime`) from `RUNTIME_MLIR` here.

The conversions are MLIR's (LLVM's APFloat): round to nearest even; a value past the
largest finite one becomes infinity (f8E5M2) or NaN (the types without infinities), as
does an infinity; NaN stays NaN; -0 is +0 in the FNUZ types, whose only NaN is 0x80.
(torch's own f32 -> float8_e4m3fn conversion saturates instead: 1e9 and inf become 448.)
f64 goes through f32 rounded to odd, exact by Boldo & Melquiond (24 >= 4 + 2 bits).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from .float_bits import SIGN_AND_SUBNORMAL


@dataclass(frozen=True)
class Float8:
    """One 8-bit float format: exponent bits, mantissa bits, bias, and where its NaN is."""

    name: str  # the MLIR type
    mantissa: int
    bias: int
    kind: str  # "ieee": infinities and NaNs at the top exponent; "fn": NaN is S.1111.111 only; "fnuz": NaN is 0x80 only

    @property
    def largest_code(self) -> int:
        """The bits of the largest finite magnitude."""
        return {"ieee": 0x7B, "fn": 0x7E, "fnuz": 0x7F}[self.kind]

    @property
    def overflow_code(self) -> int:
        """What a magnitude past the largest finite one becomes (infinity, or NaN)."""
        return {"ieee": 0x7C, "fn": 0x7F, "fnuz": 0x80}[self.kind]

    @property
    def nan_code(self) -> int:
        return {"ieee": 0x7E, "fn": 0x7F, "fnuz": 0x80}[self.kind]


FORMATS = {
    f.name: f
    for f in (
        Float8("f8E4M3FN", 3, 7, "fn"),
        Float8("f8E4M3FNUZ", 3, 8, "fnuz"),
        Float8("f8E5M2", 2, 15, "ieee"),
        Float8("f8E5M2FNUZ", 2, 16, "fnuz"),
    )
}


def _to_float8(f: Float8) -> str:
    """`e2e_f32_bits_to_<f8>_bits`: IEEE f32 bits -> the format's bits, rounded to nearest even."""
    shift = 23 - f.mantissa
    smallest_normal = (1 - f.bias + 127) << 23
    # f32's ulp at `magic` is the format's subnormal ulp, 2^(1 - bias - mantissa): adding it
    # rounds a subnormal in hardware (as the f16 conversion of softfloat does).
    magic = (1 - f.bias - f.mantissa + 23 + 127) << 23
    rebias = (127 - f.bias) << f.mantissa
    keeps_sign = "arith.constant true" if f.kind != "fnuz" else "arith.cmpi ne, %magnitude, %c0 : i32"
    # In the FNUZ types a zero has no sign (0x80 is their NaN) and neither has their NaN.
    return f"""
func.func @e2e_f32_bits_to_{f.name}_bits(%f: i32) -> i8 {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c24 = arith.constant 24 : i32
  %shift = arith.constant {shift} : i32
  %half_ulp = arith.constant {(1 << (shift - 1)) - 1} : i32
  %rebias = arith.constant {rebias} : i32
  %sign_mask = arith.constant -2147483648 : i32
  %infinity = arith.constant 2139095040 : i32
  %smallest_normal = arith.constant {smallest_normal} : i32
  %magic = arith.constant {magic} : i32
  %largest = arith.constant {f.largest_code} : i32
  %overflow_code = arith.constant {f.overflow_code} : i32
  %nan_code = arith.constant {f.nan_code} : i32
{SIGN_AND_SUBNORMAL}  %is_nan = arith.cmpi ugt, %a, %infinity : i32
  %kept = arith.shrui %a, %shift : i32
  %odd = arith.andi %kept, %c1 : i32
  %round = arith.addi %half_ulp, %odd : i32
  %rounded = arith.addi %a, %round : i32
  %rounded_kept = arith.shrui %rounded, %shift : i32
  %normal = arith.subi %rounded_kept, %rebias : i32
  %overflow = arith.cmpi ugt, %normal, %largest : i32
  %big_or_normal = arith.select %overflow, %overflow_code, %normal : i32
  %finite = arith.select %is_small, %small, %big_or_normal : i32
  %magnitude = arith.select %is_nan, %nan_code, %finite : i32
  %not_nan = arith.cmpi ne, %magnitude, %nan_code : i32
  %nonzero = {keeps_sign}
  %signed = arith.andi %not_nan, %nonzero : i1
  %sign8 = arith.shrui %sign, %c24 : i32
  %with_sign = arith.ori %magnitude, %sign8 : i32
  %bits = arith.select %signed, %with_sign, %magnitude : i32
  %result = arith.trunci %bits : i32 to i8
  return %result : i8
}}

func.func @e2e_f64_to_{f.name}_bits(%x: f64) -> i8 {{
  %bits = func.call @e2e_f64_to_f32_bits_round_to_odd(%x) : (f64) -> i32
  %result = func.call @e2e_f32_bits_to_{f.name}_bits(%bits) : (i32) -> i8
  return %result : i8
}}
"""


def _from_float8(f: Float8) -> str:
    """`e2e_<f8>_bits_to_f32_bits`: the format's bits -> IEEE f32 bits (exact)."""
    special = {
        # a NaN or infinity: the top exponent (f8E5M2), S.1111.111 (f8E4M3FN), 0x80 (FNUZ)
        "ieee": "arith.cmpi uge, %magnitude, %c124 : i32",
        "fn": "arith.cmpi eq, %magnitude, %c127 : i32",
        "fnuz": "arith.cmpi eq, %b, %c128 : i32",
    }[f.kind]
    return f"""
func.func @e2e_{f.name}_bits_to_f32_bits(%h: i8) -> i32 {{
  %c24 = arith.constant 24 : i32
  %c124 = arith.constant 124 : i32
  %c127 = arith.constant 127 : i32
  %c128 = arith.constant 128 : i32
  %c0 = arith.constant 0 : i32
  %shift = arith.constant {23 - f.mantissa} : i32
  %mantissa_bits = arith.constant {f.mantissa} : i32
  %mantissa_mask = arith.constant {(1 << f.mantissa) - 1} : i32
  %rebias = arith.constant {(127 - f.bias) << 23} : i32
  %subnormal_ulp = arith.constant {float(2.0 ** (1 - f.bias - f.mantissa))!r} : f32
  %infinity = arith.constant 2139095040 : i32
  %quiet_nan = arith.constant 2143289344 : i32
  %b = arith.extui %h : i8 to i32
  %sign_bit = arith.andi %b, %c128 : i32
  %sign = arith.shli %sign_bit, %c24 : i32
  %magnitude = arith.andi %b, %c127 : i32
  %exponent = arith.shrui %magnitude, %mantissa_bits : i32
  %mantissa = arith.andi %magnitude, %mantissa_mask : i32
  %shifted = arith.shli %magnitude, %shift : i32
  %normal = arith.addi %shifted, %rebias : i32
  %mantissa_float = arith.uitofp %mantissa : i32 to f32
  %subnormal_float = arith.mulf %mantissa_float, %subnormal_ulp : f32
  %subnormal = arith.bitcast %subnormal_float : f32 to i32
  %is_subnormal = arith.cmpi eq, %exponent, %c0 : i32
  %finite = arith.select %is_subnormal, %subnormal, %normal : i32
  %is_special = {special}
  %is_infinity = arith.cmpi eq, %mantissa, %c0 : i32
  %is_ieee = arith.constant {"true" if f.kind == "ieee" else "false"}
  %infinite = arith.andi %is_ieee, %is_infinity : i1
  %special_bits = arith.select %infinite, %infinity, %quiet_nan : i32
  %unsigned = arith.select %is_special, %special_bits, %finite : i32
  %result = arith.ori %unsigned, %sign : i32
  return %result : i32
}}
"""


RUNTIME_MLIR = "".join(_to_float8(f) + _from_float8(f) for f in FORMATS.values())

# The runtime's entry points the rewritten programs call, with their types.
RUNTIME_SYMBOLS = {
    **{f"e2e_f32_bits_to_{name}_bits": "(i32) -> i8" for name in FORMATS},
    **{f"e2e_f64_to_{name}_bits": "(f64) -> i8" for name in FORMATS},
    **{f"e2e_{name}_bits_to_f32_bits": "(i8) -> i32" for name in FORMATS},
}


def _float8(type_: ir.Type) -> Float8 | None:
    return FORMATS.get(str(type_))


def expand_conversions(module: ir.Module) -> None:
    """Replace every scalar `arith.extf` / `arith.truncf` to or from a float8 type by a call
    of the conversion runtime (declared in `module`), through f32 (or f64 rounded to odd)."""
    with module.context, ir.Location.unknown():
        conversions = []
        _collect(module.operation, conversions)
        if not conversions:
            return
        i8, i32 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
        f32, f64 = ir.F32Type.get(), ir.F64Type.get()
        declared: set[str] = {
            ir.StringAttr(op.attributes["sym_name"]).value
            for op in module.body.operations
            if op.operation.name == "func.func"
        }

        def call(name: str, argument: ir.Value, result: ir.Type) -> ir.Value:
            if name not in declared:  # a declaration: the runtime is linked in by the engine
                with ir.InsertionPoint.at_block_begin(module.body):
                    ir.Operation.create(
                        "func.func",
                        attributes={
                            "sym_name": ir.StringAttr.get(name),
                            "function_type": ir.TypeAttr.get(ir.FunctionType.get([argument.type], [result])),
                            "sym_visibility": ir.StringAttr.get("private"),
                        },
                        regions=1,
                    )
                declared.add(name)
            return ir.Operation.create(
                "func.call",
                results=[result],
                operands=[argument],
                attributes={"callee": ir.FlatSymbolRefAttr.get(name)},
            ).result

        def op(name: str, value: ir.Value, result: ir.Type) -> ir.Value:
            return ir.Operation.create(name, results=[result], operands=[value]).result

        def as_f32(value: ir.Value) -> ir.Value:
            """`value` in f32, exactly (it is f32 or narrower)."""
            if value.type == f32:
                return value
            source = _float8(value.type)
            if source is None:
                return op("arith.extf", value, f32)
            bits = call(f"e2e_{source.name}_bits_to_f32_bits", op("arith.bitcast", value, i8), i32)
            return op("arith.bitcast", bits, f32)

        for conversion in conversions:
            (source,) = conversion.operands
            target = conversion.results[0].type
            with ir.InsertionPoint(conversion):
                if _float8(target) is not None:  # to a float8 type (from a wider or another float8 one)
                    name = _float8(target).name
                    if source.type == f64:
                        bits = call(f"e2e_f64_to_{name}_bits", source, i8)
                    else:
                        bits = call(f"e2e_f32_bits_to_{name}_bits", op("arith.bitcast", as_f32(source), i32), i8)
                    value = op("arith.bitcast", bits, target)
                else:  # from a float8 type: exact in f32, so exact in any wider type
                    value = as_f32(source)
                    if target != f32:
                        value = op("arith.extf" if target == f64 else "arith.truncf", value, target)
            conversion.results[0].replace_all_uses_with(value)
            conversion.erase()


def _collect(operation, found: list) -> None:
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if op.name in ("arith.extf", "arith.truncf") and "roundingmode" not in op.attributes:
                    if _float8(op.operands[0].type) or _float8(op.results[0].type):
                        found.append(op)
                _collect(op, found)
