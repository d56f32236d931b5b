"""Compiled programs mean the same on every x86-64 CPU.

For each element type the suite uses, a program applies every arithmetic, math and
conversion op to tensors of that type. Lowered by the RefBackend it must (a) leave no
float op on f16/bf16 for LLVM to lower by the host's ISA, (b) call no external function
outside libc/libm and the RefBackend's own runtime (`compiler.replay_runtime.softfloat`), and (c) load
and run here. (a) and (b) hold whatever this machine's CPU is; run the file under
`qemu-x86_64 -cpu Haswell` or `-cpu qemu64` (no F16C) to see (c) on such a CPU.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from compiler.refbackend import compile_linalg, lower_to_llvm
from compiler.replay_runtime import softfloat
from compiler.stages import module_text, new_context, parse_module

FLOAT8 = ("f8E4M3FN", "f8E4M3FNUZ", "f8E5M2", "f8E5M2FNUZ")
FLOATS = ("bf16", "f16", "f32", "f64", *FLOAT8)
INTEGERS = ("i1", "i8", "i16", "i32", "i64")
BITS = {"bf16": 16, "f16": 16, "f32": 32, "f64": 64, "i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
BITS.update({name: 8 for name in FLOAT8})
TORCH = {
    "f8E4M3FN": torch.float8_e4m3fn,
    "f8E4M3FNUZ": torch.float8_e4m3fnuz,
    "f8E5M2": torch.float8_e5m2,
    "f8E5M2FNUZ": torch.float8_e5m2fnuz,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i1": torch.bool,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "complex<f32>": torch.complex64,
    "complex<f64>": torch.complex128,
}
FLOAT_BINARY = (
    "arith.addf",
    "arith.subf",
    "arith.mulf",
    "arith.divf",
    "arith.remf",
    "arith.maximumf",
    "arith.minimumf",
    "arith.maxnumf",
    "arith.minnumf",
    "math.powf",
    "math.atan2",
    "math.copysign",
)
FLOAT_UNARY = (
    "arith.negf",
    "math.absf",
    "math.ceil",
    "math.floor",
    "math.round",
    "math.roundeven",
    "math.trunc",
    "math.sqrt",
    "math.rsqrt",
    "math.exp",
    "math.exp2",
    "math.expm1",
    "math.log",
    "math.log2",
    "math.log10",
    "math.log1p",
    "math.sin",
    "math.cos",
    "math.tan",
    "math.tanh",
    "math.atan",
    "math.erf",
)
INT_BINARY = (
    "arith.addi",
    "arith.subi",
    "arith.muli",
    "arith.divsi",
    "arith.divui",
    "arith.remsi",
    "arith.remui",
    "arith.ceildivsi",
    "arith.floordivsi",
    "arith.maxsi",
    "arith.minsi",
    "arith.maxui",
    "arith.minui",
    "arith.andi",
    "arith.ori",
    "arith.xori",
    "arith.shli",
    "arith.shrsi",
    "arith.shrui",
)
COMPLEX_BINARY = ("complex.add", "complex.sub", "complex.mul", "complex.div")

# What a lowered program may call: the C library and libm, memrefCopy and the result
# callback the RefBackend registers, and the RefBackend's own conversions.
LIBC = {"malloc", "free", "aligned_alloc", "memcpy", "memset", "memmove", "abort", "memrefCopy"}
LIBM = {
    f + suffix
    for f in (
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "tanh",
        "atan",
        "atan2",
        "erf",
        "pow",
        "sqrt",
        "fmod",
        "floor",
        "ceil",
        "round",
        "roundeven",
        "trunc",
        "cbrt",
        "hypot",
        "fabs",
        "copysign",
    )
    for suffix in ("f", "")
}
ALLOWED_CALLS = LIBC | LIBM | set(softfloat.RUNTIME_SYMBOLS)
# Float ops on f16 or bf16 values, which LLVM lowers as the host CPU allows...
_HALF_FLOAT_OPS = re.compile(
    r"= llvm\.(f[a-z]+|intr\.[a-z0-9.]+|fcmp|sitofp|uitofp|fptosi|fptoui)\b[^\n]*\b(bf16|f16)\b[^\n]*"
)
# ...but these conversions: native (F16C; a shift for bf16) or `compiler.replay_runtime.softfloat`, the same bits.
# (f64 -> bf16 is left by arith-expand{include-bf16}, which expands only f32 -> bf16.)
_PORTABLE_CONVERSIONS = re.compile(
    r"= llvm\.(fpext [^\n]*: (f16|bf16) to (f32|f64)|fptrunc [^\n]*: (f32|f64) to f16|fptrunc [^\n]*: f64 to bf16)$"
)


def _program(element: str) -> tuple[str, list[str]]:
    """@main(a, b) applying every op of `element`, and its result element types."""
    tensor = lambda t: f"tensor<4x{t}>"  # noqa: E731
    lines, results = [], []

    def emit(expression: str, result_element: str) -> None:
        lines.append(f"  %r{len(results)} = {expression}")
        results.append(result_element)

    t = tensor(element)
    if element in FLOATS:
        for op in FLOAT_BINARY:
            emit(f"{op} %a, %b : {t}", element)
        for op in FLOAT_UNARY:
            # refback-expand-ops-for-llvm makes math.erf illegal but expands it for f32
            # only: f64 erf fails in `lower` (the RefBackend's limit, as upstream's).
            if not (op == "math.erf" and element == "f64"):
                emit(f"{op} %a : {t}", element)
        emit(f"arith.cmpf olt, %a, %b : {t}", "i1")
        emit(f"arith.cmpf uno, %a, %b : {t}", "i1")
        for other in FLOATS:
            if BITS[other] > BITS[element]:
                emit(f"arith.extf %a : {t} to {tensor(other)}", other)
            elif BITS[other] < BITS[element]:
                emit(f"arith.truncf %a : {t} to {tensor(other)}", other)
        for integer in INTEGERS[1:]:
            emit(f"arith.fptosi %a : {t} to {tensor(integer)}", integer)
            emit(f"arith.fptoui %a : {t} to {tensor(integer)}", integer)
    elif element in INTEGERS:
        for op in INT_BINARY if element != "i1" else ("arith.andi", "arith.ori", "arith.xori"):
            emit(f"{op} %a, %b : {t}", element)
        emit(f"arith.cmpi slt, %a, %b : {t}", "i1")
        for other in INTEGERS:
            if BITS[other] > BITS[element]:
                emit(f"arith.extsi %a : {t} to {tensor(other)}", other)
                emit(f"arith.extui %a : {t} to {tensor(other)}", other)
            elif BITS[other] < BITS[element]:
                emit(f"arith.trunci %a : {t} to {tensor(other)}", other)
        for other in FLOATS:
            emit(f"arith.sitofp %a : {t} to {tensor(other)}", other)
            emit(f"arith.uitofp %a : {t} to {tensor(other)}", other)
    else:  # complex<f32>, complex<f64>: complex ops take scalars, so each in a linalg.generic
        part = element[len("complex<") : -1]
        for op in COMPLEX_BINARY + ("complex.abs",):
            out = part if op == "complex.abs" else element
            operands = "%x" if op == "complex.abs" else "%x, %y"
            lines.append(f"  %init{len(results)} = tensor.empty() : {tensor(out)}")
            emit(
                "linalg.generic {indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (d)>, "
                'affine_map<(d) -> (d)>], iterator_types = ["parallel"]} '
                f"ins(%a, %b : {t}, {t}) outs(%init{len(results)} : {tensor(out)}) {{\n"
                f"  ^bb0(%x: {element}, %y: {element}, %o: {out}):\n"
                f"    %v = {op} {operands} : {element}\n"
                f"    linalg.yield %v : {out}\n  }} -> {tensor(out)}",
                out,
            )
    returns = ", ".join(f"%r{i}" for i in range(len(results)))
    types = ", ".join(tensor(r) for r in results)
    text = (
        f"func.func @main(%a: {t}, %b: {t}) -> ({types}) {{\n"
        + "\n".join(lines)
        + f"\n  return {returns} : {types}\n}}\n"
    )
    return text, results


ELEMENTS = FLOATS + INTEGERS + ("complex<f32>", "complex<f64>")


@pytest.fixture(scope="module")
def context():
    return new_context()


def _inputs(element: str) -> list[torch.Tensor]:
    dtype = TORCH[element]
    if dtype == torch.bool:
        return [torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])]
    if dtype.is_complex:
        return [torch.tensor([1 + 2j, -3 + 0.5j, 0.25 - 1j, 2 + 0j], dtype=dtype)] * 2
    if dtype.is_floating_point:
        return [torch.tensor([1.5, -2.25, 0.5, 3.0]).to(dtype), torch.tensor([0.75, 2.0, -1.5, 0.125]).to(dtype)]
    return [torch.tensor([7, -3, 5, 2], dtype=dtype), torch.tensor([2, 5, -3, 1], dtype=dtype)]


@pytest.mark.parametrize("element", ELEMENTS)
def test_every_op_of_a_dtype_lowers_portably_and_runs(element, context):
    text, result_elements = _program(element)
    with context:
        lowered = parse_module(text, context)
        lower_to_llvm(lowered)
        llvm_text = module_text(lowered)
    host_dependent = [
        m.group(0) for m in _HALF_FLOAT_OPS.finditer(llvm_text) if not _PORTABLE_CONVERSIONS.search(m.group(0))
    ]
    assert not host_dependent, f"{element}: 16-bit float ops left for LLVM to lower by CPU:\n" + "\n".join(
        host_dependent[:5]
    )
    external = set(re.findall(r"llvm\.func @([\w.$]+)\([^)]*\)[^{\n]*$", llvm_text, re.M))
    external = {name for name in external if not name.startswith("_mlir_ciface_refbackend_consume_func_return_")}
    assert external <= ALLOWED_CALLS, (
        f"{element}: calls outside libc/libm and the runtime: {sorted(external - ALLOWED_CALLS)}"
    )

    with context:
        program = compile_linalg(parse_module(text, context), [TORCH[r] for r in result_elements])
    outputs = program(*_inputs(element))
    program.close()
    assert len(outputs) == len(result_elements)
    assert [o.dtype for o in outputs] == [TORCH[r] for r in result_elements]


# Values at the edges of each conversion: halfway cases, subnormals, overflow, inf, NaN, signed zero.
EDGES = [
    0.0,
    -0.0,
    1.0,
    1 + 2**-11,
    1 + 2**-11 + 2**-30,
    1 + 3 * 2**-11,
    65504.0,
    65520.0,
    65519.99,
    1e10,
    -1e10,
    2**-24,
    2**-25,
    2**-25 + 2**-40,
    3 * 2**-26,
    6.1e-5,
    1 + 2**-8,
    1 + 2**-8 + 2**-20,
    3.3895e38,
    1e-40,
    float("inf"),
    float("-inf"),
    float("nan"),
]


def _correctly_rounded(values: torch.Tensor, target: torch.dtype) -> torch.Tensor:
    """IEEE round to nearest even from f64, as an oracle: of torch's result and its two
    neighbours, the nearest, ties to the even pattern, overflow to inf past the last
    halfway point (torch converts f64 -> 16-bit through f32, rounding twice)."""
    first = values.to(target).view(torch.int16).to(torch.int32)
    candidates = torch.stack([first - 1, first, first + 1]).clamp(-32768, 32767).to(torch.int16)
    exact = candidates.view(target).to(torch.float64)
    # inf stands for the next power of two after the largest finite value (IEEE's rule).
    beyond = 2.0 ** math.frexp(torch.finfo(target).max)[1]
    exact = torch.where(exact.isinf(), exact.sign() * beyond, exact).nan_to_num(float("inf"))
    distance = (exact - values).abs()
    nearest = distance == distance.min(0).values
    even = (candidates.to(torch.int32) & 1) == 0
    best = (nearest & (even | (nearest.sum(0) == 1))).to(torch.int8).argmax(0)
    chosen = candidates.gather(0, best.unsqueeze(0))[0].view(target)
    return torch.where(values.isfinite(), chosen, values.to(target))


@pytest.mark.parametrize(
    "source, target",
    [("f32", "f16"), ("f64", "f16"), ("f16", "f32"), ("f16", "f64"), ("f32", "bf16"), ("f64", "bf16"), ("bf16", "f32")],
)
def test_16_bit_conversions_round_to_nearest_even_exactly(source, target, context):
    """Bit-exact IEEE conversions, whichever way this CPU converts (native or the runtime)."""
    op = "extf" if BITS[target] > BITS[source] or source == "bf16" else "truncf"
    text = (
        f"func.func @main(%a: tensor<{2 * len(EDGES)}x{source}>) -> tensor<{2 * len(EDGES)}x{target}> {{\n"
        f"  %r = arith.{op} %a : tensor<{2 * len(EDGES)}x{source}> to tensor<{2 * len(EDGES)}x{target}>\n"
        f"  return %r : tensor<{2 * len(EDGES)}x{target}>\n}}\n"
    )
    values = torch.tensor(EDGES, dtype=torch.float64)
    values = torch.cat([values, -values]).to(TORCH[source])
    with context:
        program = compile_linalg(parse_module(text, context), [TORCH[target]])
    (got,) = program(values)
    program.close()
    if source == "f64":  # one rounding, where torch rounds twice
        expected = _correctly_rounded(values, TORCH[target])
    else:  # exact (widening) or a single rounding from f32: torch's answer
        expected = values.to(TORCH[target])
    assert torch.equal(got.isnan(), expected.isnan())
    bits = torch.int16 if BITS[target] == 16 else {32: torch.int32, 64: torch.int64}[BITS[target]]
    finite = ~expected.isnan()
    assert torch.equal(got[finite].view(bits), expected[finite].view(bits)), (values, got, expected)


def test_torch_rounds_f64_to_f16_twice_and_the_compiled_program_once(context):
    """Why the test above needs its own oracle: 1 + 2^-11 + 2^-30 is above the halfway
    point between 1 and the next f16, but through f32 it becomes the halfway point itself."""
    value = torch.tensor([1 + 2**-11 + 2**-30], dtype=torch.float64)
    assert value.to(torch.float16).item() == 1.0
    assert _correctly_rounded(value, torch.float16).item() == 1 + 2**-10


def test_softfloat_runtime_is_exact_on_every_f16_and_on_f32_halfway_cases():
    runtime = softfloat.conversion_runtime()
    halves = np.arange(1 << 16, dtype=np.uint16)
    widened = np.array([runtime.f16_bits_to_f32_bits(int(h)) for h in halves], dtype=np.uint32)
    nan = np.isnan(halves.view(np.float16))
    assert np.array_equal(widened[~nan], halves.view(np.float16).astype(np.float32).view(np.uint32)[~nan])
    assert np.isnan(widened[nan].view(np.float32)).all()
    # Every f16 value, the f32 values halfway between neighbours, and one ulp either side.
    exact = halves.view(np.float16).astype(np.float32).view(np.uint32)[::7]
    singles = np.concatenate([exact, exact + 0x1000, exact + 0xFFF, exact + 0x1001]).astype(np.uint32)
    narrowed = np.array([runtime.f32_bits_to_f16_bits(int(s)) for s in singles], dtype=np.uint16)
    with np.errstate(over="ignore"):
        expected = singles.view(np.float32).astype(np.float16).view(np.uint16)
    finite = ~np.isnan(singles.view(np.float32))
    assert np.array_equal(narrowed[finite], expected[finite])
    # f32 -> bf16 against torch (one rounding), and f64 -> f16 against numpy (one rounding).
    to_bf16 = np.array([runtime.f32_bits_to_bf16_bits(int(v)) for v in singles], dtype=np.uint16)
    torch_bf16 = torch.from_numpy(singles.view(np.float32).copy()).to(torch.bfloat16).view(torch.int16).numpy()
    assert np.array_equal(to_bf16[finite], torch_bf16.view(np.uint16)[finite])
    # Just past halfway by less than f32 keeps: rounding through f32 would land on the tie.
    doubles = halves.view(np.float16).astype(np.float64)[::13] * (1 + 2.0**-11 + 2.0**-30)
    doubles = doubles[np.isfinite(doubles)]
    from_double = np.array([runtime.f64_to_f16_bits(float(d)) for d in doubles], dtype=np.uint16)
    with np.errstate(over="ignore"):
        assert np.array_equal(from_double, doubles.astype(np.float16).view(np.uint16))
