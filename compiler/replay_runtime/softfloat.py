"""The runtime functions LLVM may call for 16-bit float conversions, as our own code.

LLVM lowers `fptrunc`/`fpext` between f16, bf16 and f32/f64 to native instructions
where the host CPU has them (F16C, AVX512-BF16, AVX512-FP16) and otherwise to
compiler-rt/libgcc calls: `__truncsfhf2`, `__extendhfsf2`, `__truncdfhf2` (f64 -> f16
is a call on every x86 CPU), `__truncsfbf2`, ... The ExecutionEngine resolves those in
the process, where they may be missing (libgcc before GCC 12 has none of them;
Debian 12's has the f16 ones but they are not in the global namespace, and no libgcc
has `__truncsfbf2` before GCC 13): the program then fails to load with
`Symbols not found`. So every program's engine gets these functions from here: IEEE
round-to-nearest-even conversions written as integer MLIR (no float conversion of
their own, so no recursion into the calls they define), JIT-compiled once per process.
A CPU that converts natively and one that calls these compute the same bits.

The bf16 conversions are also expanded before LLVM (`arith-expand{include-bf16=true}`
in `pipelines.LINALG_TO_LLVM`); they are here for whatever conversion a later pass
introduces.
"""

from __future__ import annotations

import ctypes

from torch_mlir import ir, passmanager
from torch_mlir.execution_engine import ExecutionEngine

from . import float8
from .codegen import codegen_level
from .float_bits import SIGN_AND_SUBNORMAL
from .mlir import new_context
from .target import pin

# Conversions on raw bits (testable exactly through ctypes), then the C-ABI entry
# points LLVM's libcalls expect. f64 -> 16-bit goes through f32 rounded to odd: with
# 24 >= 11 + 2 bits that double rounding is exact (Boldo & Melquiond).
RUNTIME_MLIR = (
    r"""
func.func @e2e_f32_bits_to_f16_bits(%f: i32) -> i16 {
  %sign_mask = arith.constant -2147483648 : i32
  %f16_max = arith.constant 1199570944 : i32      // (127 + 16) << 23: |x| >= 65536 -> inf
  %infinity = arith.constant 2139095040 : i32
  %smallest_normal = arith.constant 947912704 : i32  // 113 << 23 = 2^-14
  %magic = arith.constant 1056964608 : i32        // 0.5: aligns subnormals' ulp to f32's
  %rebias = arith.constant -939520001 : i32       // ((15 - 127) << 23) + 0xfff
  %f16_inf = arith.constant 31744 : i32
  %f16_nan = arith.constant 32256 : i32
  %c1 = arith.constant 1 : i32
  %c13 = arith.constant 13 : i32
  %c16 = arith.constant 16 : i32
"""
    + SIGN_AND_SUBNORMAL
    + r"""  %overflow = arith.cmpi uge, %a, %f16_max : i32
  %is_nan = arith.cmpi ugt, %a, %infinity : i32
  %big = arith.select %is_nan, %f16_nan, %f16_inf : i32
  %mantissa_shift = arith.shrui %a, %c13 : i32
  %odd = arith.andi %mantissa_shift, %c1 : i32
  %biased = arith.addi %a, %rebias : i32
  %rounded = arith.addi %biased, %odd : i32
  %normal = arith.shrui %rounded, %c13 : i32
  %finite = arith.select %is_small, %small, %normal : i32
  %magnitude = arith.select %overflow, %big, %finite : i32
  %sign16 = arith.shrui %sign, %c16 : i32
  %bits = arith.ori %magnitude, %sign16 : i32
  %result = arith.trunci %bits : i32 to i16
  return %result : i16
}

func.func @e2e_f16_bits_to_f32_bits(%h: i16) -> i32 {
  %c13 = arith.constant 13 : i32
  %c16 = arith.constant 16 : i32
  %sign_mask = arith.constant 32768 : i32
  %magnitude_mask = arith.constant 32767 : i32
  %f16_inf = arith.constant 31744 : i32
  %exponent_ones = arith.constant 2139095040 : i32
  %two_pow_112 = arith.constant 0x77800000 : f32  // rebias 15 -> 127; exact for subnormals too
  %b = arith.extui %h : i16 to i32
  %sign_bit = arith.andi %b, %sign_mask : i32
  %sign = arith.shli %sign_bit, %c16 : i32
  %magnitude = arith.andi %b, %magnitude_mask : i32
  %shifted = arith.shli %magnitude, %c13 : i32
  %shifted_float = arith.bitcast %shifted : i32 to f32
  %scaled = arith.mulf %shifted_float, %two_pow_112 : f32
  %scaled_bits = arith.bitcast %scaled : f32 to i32
  %is_inf_or_nan = arith.cmpi uge, %magnitude, %f16_inf : i32
  %inf_or_nan = arith.ori %shifted, %exponent_ones : i32
  %unsigned = arith.select %is_inf_or_nan, %inf_or_nan, %scaled_bits : i32
  %result = arith.ori %unsigned, %sign : i32
  return %result : i32
}

func.func @e2e_f32_bits_to_bf16_bits(%f: i32) -> i16 {
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %half_ulp = arith.constant 32767 : i32
  %magnitude_mask = arith.constant 2147483647 : i32
  %infinity = arith.constant 2139095040 : i32
  %quiet = arith.constant 4194304 : i32   // bf16's quiet bit, kept through the shift
  %magnitude = arith.andi %f, %magnitude_mask : i32
  %is_nan = arith.cmpi ugt, %magnitude, %infinity : i32
  %upper = arith.shrui %f, %c16 : i32
  %odd = arith.andi %upper, %c1 : i32
  %bias = arith.addi %half_ulp, %odd : i32
  %rounded = arith.addi %f, %bias : i32
  %quieted = arith.ori %f, %quiet : i32
  %chosen = arith.select %is_nan, %quieted, %rounded : i32
  %bits = arith.shrui %chosen, %c16 : i32
  %result = arith.trunci %bits : i32 to i16
  return %result : i16
}

// f64 -> f32 rounded to odd: truncate toward zero, then set the last bit if inexact.
func.func @e2e_f64_to_f32_bits_round_to_odd(%x: f64) -> i32 {
  %c1 = arith.constant 1 : i32
  %nearest = arith.truncf %x : f64 to f32
  %back = arith.extf %nearest : f32 to f64
  %inexact = arith.cmpf one, %back, %x : f64
  %bits = arith.bitcast %nearest : f32 to i32
  %abs_back = math.absf %back : f64
  %abs_x = math.absf %x : f64
  %rounded_away = arith.cmpf ogt, %abs_back, %abs_x : f64
  %toward_zero_down = arith.subi %bits, %c1 : i32
  %toward_zero = arith.select %rounded_away, %toward_zero_down, %bits : i32
  %odd = arith.ori %toward_zero, %c1 : i32
  %result = arith.select %inexact, %odd, %bits : i32
  return %result : i32
}

func.func @e2e_f64_to_f16_bits(%x: f64) -> i16 {
  %bits = func.call @e2e_f64_to_f32_bits_round_to_odd(%x) : (f64) -> i32
  %h = func.call @e2e_f32_bits_to_f16_bits(%bits) : (i32) -> i16
  return %h : i16
}

func.func @__truncsfhf2(%x: f32) -> f16 {
  %bits = arith.bitcast %x : f32 to i32
  %h = func.call @e2e_f32_bits_to_f16_bits(%bits) : (i32) -> i16
  %result = arith.bitcast %h : i16 to f16
  return %result : f16
}

func.func @__truncdfhf2(%x: f64) -> f16 {
  %h = func.call @e2e_f64_to_f16_bits(%x) : (f64) -> i16
  %result = arith.bitcast %h : i16 to f16
  return %result : f16
}

func.func @__extendhfsf2(%x: f16) -> f32 {
  %h = arith.bitcast %x : f16 to i16
  %bits = func.call @e2e_f16_bits_to_f32_bits(%h) : (i16) -> i32
  %result = arith.bitcast %bits : i32 to f32
  return %result : f32
}

func.func @__extendhfdf2(%x: f16) -> f64 {
  %single = func.call @__extendhfsf2(%x) : (f16) -> f32
  %result = arith.extf %single : f32 to f64
  return %result : f64
}

func.func @__truncsfbf2(%x: f32) -> bf16 {
  %bits = arith.bitcast %x : f32 to i32
  %b = func.call @e2e_f32_bits_to_bf16_bits(%bits) : (i32) -> i16
  %result = arith.bitcast %b : i16 to bf16
  return %result : bf16
}

func.func @__truncdfbf2(%x: f64) -> bf16 {
  %bits = func.call @e2e_f64_to_f32_bits_round_to_odd(%x) : (f64) -> i32
  %b = func.call @e2e_f32_bits_to_bf16_bits(%bits) : (i32) -> i16
  %result = arith.bitcast %b : i16 to bf16
  return %result : bf16
}
"""
)

# The C-ABI entry points, by the name LLVM's codegen calls (and the float8 conversions
# `float8.expand_conversions` calls), with their types.
RUNTIME_SYMBOLS = {
    **float8.RUNTIME_SYMBOLS,
    "__truncsfhf2": "(f32) -> f16",
    "__truncdfhf2": "(f64) -> f16",
    "__extendhfsf2": "(f16) -> f32",
    "__extendhfdf2": "(f16) -> f64",
    "__truncsfbf2": "(f32) -> bf16",
    "__truncdfbf2": "(f64) -> bf16",
}


def _address_accessors() -> str:
    """One function per entry point returning its address (`raw_lookup` finds only the
    packed `_mlir_<name>` wrappers, and a libcall needs the function itself)."""
    return "".join(
        f"func.func @e2e_address_of{name}() -> ({signature}) {{\n"
        f"  %f = func.constant @{name} : {signature}\n"
        f"  return %f : {signature}\n}}\n"
        for name, signature in RUNTIME_SYMBOLS.items()
    )


class Runtime:
    """The conversions, JIT-compiled once per process (see `runtime()`)."""

    def __init__(self):
        self._context = new_context()
        with self._context:
            self._module = ir.Module.parse(RUNTIME_MLIR + float8.RUNTIME_MLIR + _address_accessors())
            passmanager.PassManager.parse(
                "builtin.module(func.func(convert-math-to-llvm),convert-arith-to-llvm,"
                "convert-func-to-llvm,reconcile-unrealized-casts)"
            ).run(self._module.operation)
            pin(self._module)
            self._engine = ExecutionEngine(self._module, opt_level=2, shared_libs=[], enable_object_dump=False)
        with codegen_level(2):  # compiled at the first lookup
            self.addresses = {
                name: self._call_packed(f"e2e_address_of{name}", ctypes.c_void_p) for name in RUNTIME_SYMBOLS
            }

    def _call_packed(self, name: str, result_type, *arguments):
        """Call a function of the module through its packed wrapper: args[i] point at the
        arguments, the last at the result."""
        result = result_type()
        slots = [ctypes.pointer(argument) for argument in arguments] + [ctypes.pointer(result)]
        packed = (ctypes.c_void_p * len(slots))(*[ctypes.cast(s, ctypes.c_void_p) for s in slots])
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._engine.raw_lookup(name))(packed)
        return result.value

    def f32_bits_to_f16_bits(self, bits: int) -> int:
        return self._call_packed("e2e_f32_bits_to_f16_bits", ctypes.c_uint16, ctypes.c_uint32(bits))

    def f16_bits_to_f32_bits(self, bits: int) -> int:
        return self._call_packed("e2e_f16_bits_to_f32_bits", ctypes.c_uint32, ctypes.c_uint16(bits))

    def f32_bits_to_bf16_bits(self, bits: int) -> int:
        return self._call_packed("e2e_f32_bits_to_bf16_bits", ctypes.c_uint16, ctypes.c_uint32(bits))

    def f64_to_f16_bits(self, value: float) -> int:
        return self._call_packed("e2e_f64_to_f16_bits", ctypes.c_uint16, ctypes.c_double(value))

    def f32_bits_to_float8_bits(self, float8: str, bits: int) -> int:
        """`float8`: an MLIR type name, e.g. "f8E4M3FN"."""
        return self._call_packed(f"e2e_f32_bits_to_{float8}_bits", ctypes.c_uint8, ctypes.c_uint32(bits))

    def f64_to_float8_bits(self, float8: str, value: float) -> int:
        return self._call_packed(f"e2e_f64_to_{float8}_bits", ctypes.c_uint8, ctypes.c_double(value))

    def float8_bits_to_f32_bits(self, float8: str, bits: int) -> int:
        return self._call_packed(f"e2e_{float8}_bits_to_f32_bits", ctypes.c_uint32, ctypes.c_uint8(bits))

    def register(self, engine) -> None:
        """Give a program's ExecutionEngine the conversions it may call."""
        for name, address in self.addresses.items():
            engine.raw_register_runtime(name, ctypes.c_void_p(address))


_RUNTIME: Runtime | None = None


def conversion_runtime() -> Runtime:
    """The process's conversion runtime, compiled on first use."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = Runtime()
    return _RUNTIME
