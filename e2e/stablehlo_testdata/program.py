"""One program of StableHLO's testdata: its checks, the rewrite that returns what they
check, its expected values, and each check's own comparison.

A program's `@main` calls `@inputs()` and `@expected()`, runs one op and checks the result
with `stablehlo.custom_call @check.<kind>(...)`. `read_program` keeps the checks as
`Check`s, drops their calls and makes `@main` return the checked values (in check order;
the module's own name, `@jit_main`, is dropped: IREE would name its VM module after it);
the expected operands (results of `call @expected()`, or constants in `@main`) are parsed
from their `dense<...>` text into torch tensors, the test's golden values.

Comparisons (`compare`), as `stablehlo-translate --interpret` (the RUN line of every
program, what StableHLO's CI runs) evaluates the custom calls at the corpus's commit
3c9301c11: `StablehloTranslateInterpreterFallback` (`stablehlo/tools/
StablehloTranslateMain.cpp`) with `stablehlo/tests/CheckOps.cpp` and
`areApproximatelyEqual` (`stablehlo/reference/Element.cpp`):

- `expect_eq`: `evalExpectEqOp`, exact, element by element (floats by value, so
  `-0 == 0`; complex part by part; integers and booleans by value). One departure: NaN
  matches NaN (APFloat's `==` says no, but the corpus's `sort_float32_5` expects NaN
  under `expect_eq`: it is `RUN-DISABLED(#2497)` upstream, and no executor could pass it);
- `expect_almost_eq`: `evalExpectAlmostEqOp` with an absolute tolerance of 1e-3 (the
  custom call's own, `APFloat(0.001)`; the check dialect's op takes one as an attribute):
  per element (a complex one part by part), equal, or both NaN, or both finite and
  `|actual - expected| <= 1e-3`, the difference taken in double; an infinity matches only
  itself, no sign condition (zero against a finite value is the difference too);
- `eq` (on a float or complex type): the same with 1e-4 (`evalCustomCallCheckEq`); on an
  integer or boolean type, exact;
- `expect_close`: `evalExpectCloseOp(actual, expected, 0, 3)`: every element's
  `ULPDifference` is at most 3 (the custom call's bounds: it reads no attributes); a
  complex element's is its parts' larger. `ULPDifference`: 0 for bitwise-equal values and
  for two NaNs (any payloads); for two finite values, the difference of their magnitudes'
  bit patterns, or their sum across zero (`-0` against `0`: 0; a subnormal counts its
  bits, so `0` against the smallest normal float32 is 2**23); otherwise (an infinity
  against anything but itself, a NaN against a number) the largest distance.

A program that cannot be taken gets the reason (`NotTaken`), counted by
`python -m e2e.stablehlo_testdata --report`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

KINDS = ("expect_eq", "expect_close", "expect_almost_eq", "eq")
SPLIT = "\n// -----\n"  # between the modules of a file run with `-split-input-file`
# The absolute tolerance of a custom call that compares floats within one (StableHLO's
# interpreter fixes both: `APFloat(0.001)` and `APFloat(0.0001)`).
ALMOST_EQ_TOLERANCE = {"expect_almost_eq": 1e-3, "eq": 1e-4}
MAX_ULP = 3  # check.expect_close as a custom call: `evalExpectCloseOp(actual, expected, 0, 3)`

# Why a program is not taken.
NO_CHECK = "no check call comparing with expected values (dynamic-shape programs, *_const checks)"
# dynamic/: @main takes arguments (dynamic shapes, a dimension size) and nothing gives them
# values: no @inputs(), no expected values, no check. Their RUN lines test only the
# serialization round trip (`stablehlo-translate --serialize | --deserialize` prints as
# `stablehlo-opt` does), so a run would have no oracle.
MAIN_ARGS = "@main takes arguments, and no inputs, expected values or check (a serialization round-trip test)"
COMPUTED_EXPECTED = "expected operand is not a constant of @expected() or @main"
CONST_CHECK = "check.*_const: the expected value is the check op's attribute"
UNREADABLE = "check call not in the pretty `stablehlo.custom_call @check.<kind>` form"
NO_TORCH_ELEMENT = "element type {} has no torch dtype"


class NotTaken(Exception):
    """Why a program is not a test (its message is the reason)."""


# MLIR element type -> (torch dtype, numpy storage dtype of its bytes)
ELEMENTS: dict[str, tuple[torch.dtype, str]] = {
    "i1": (torch.bool, "u1"),
    "i8": (torch.int8, "<i1"),
    "i16": (torch.int16, "<i2"),
    "i32": (torch.int32, "<i4"),
    "i64": (torch.int64, "<i8"),
    "ui8": (torch.uint8, "<u1"),
    "ui16": (torch.uint16, "<u2"),
    "ui32": (torch.uint32, "<u4"),
    "ui64": (torch.uint64, "<u8"),
    "f16": (torch.float16, "<f2"),
    "bf16": (torch.bfloat16, "<u2"),
    "f32": (torch.float32, "<f4"),
    "f64": (torch.float64, "<f8"),
    "complex<f32>": (torch.complex64, "<c8"),
    "complex<f64>": (torch.complex128, "<c16"),
}
FLOAT_BITS = {"f16": ("<u2", np.float16), "f32": ("<u4", np.float32), "f64": ("<u8", np.float64)}


@dataclass
class Check:
    kind: str  # one of KINDS
    computed: str  # SSA name in @main
    expected: str
    type: str  # the computed operand's tensor type
    attributes: dict[str, float] = field(default_factory=dict)


@dataclass
class Program:
    name: str  # the file's path below the corpus, without `.mlir`
    text: str  # the rewritten program: @main returns the checked values
    checks: list[Check]
    expected: list[torch.Tensor]
    result_elements: list[str]  # MLIR element type of each result


def tensor_type(text: str) -> tuple[tuple[int, ...], str]:
    match = re.fullmatch(r"tensor<((?:\d+x)*)(.+)>", text.strip())
    if match is None:
        raise NotTaken(f"not a static tensor type: {text.strip()[:60]}")
    dims = tuple(int(d) for d in match.group(1).split("x") if d)
    return dims, match.group(2)


def split_types(text: str) -> list[str]:
    """`tensor<2xf32>, tensor<complex<f64>>` -> its types (commas inside <> kept)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _function(text: str, name: str) -> tuple[int, int] | None:
    """The span of `func.func ... @name(` up to its closing brace at two spaces' indent."""
    match = re.search(rf"^  func\.func (?:public |private )?@{name}\(.*$", text, re.M)
    if match is None:
        return None
    end = text.find("\n  }\n", match.end())
    return match.start(), end + len("\n  }")


_CONSTANT = re.compile(r"^\s*(%[\w]+) = stablehlo\.constant dense<(.*)> : (tensor<.*>)\s*$")
_CHECK = re.compile(
    r"^\s*(?:%[\w]+ = )?stablehlo\.custom_call @check\.(\w+)\(([^)]*)\)\s*(\{[^}]*\})?\s*:\s*\((.*)\)\s*->.*$"
)
_ATTRIBUTE = re.compile(r"(\w+) = ([-+0-9.eE]+)")


def dense_values(literal: str, type_text: str) -> torch.Tensor:
    """The tensor a `dense<literal> : tensor<...>` attribute holds."""
    dims, element = tensor_type(type_text)
    if element not in ELEMENTS:
        raise NotTaken(NO_TORCH_ELEMENT.format(element))
    dtype, storage = ELEMENTS[element]
    count = int(np.prod(dims, dtype=np.int64))
    literal = literal.strip()
    if literal.startswith('"0x'):
        raw = bytes.fromhex(literal[3:-1])
        array = np.frombuffer(raw, dtype=np.dtype(storage))
        if element == "i1" and len(array) * 8 == count:
            array = np.unpackbits(array, bitorder="little")
        if len(array) == 1 and count != 1:
            array = np.repeat(array, count)
        if element == "i1":
            array = array != 0
        return _as_torch(array.reshape(dims), element)
    if element.startswith("complex"):
        pairs = re.findall(r"\(([^,()]+),([^,()]+)\)", literal)
        real = np.array([_float(a, element[8:-1]) for a, _ in pairs])
        imag = np.array([_float(b, element[8:-1]) for _, b in pairs])
        array = (real + 1j * imag).astype(np.dtype(storage))
    else:
        tokens = re.findall(r"[^\[\],\s]+", literal)
        if element == "i1":
            array = np.array([t in ("true", "1") for t in tokens], dtype=bool)
        elif element in ("f16", "bf16", "f32", "f64"):
            array = np.array([_float(t, element) for t in tokens], dtype=np.float64)
        else:
            array = np.array([int(t, 0) for t in tokens], dtype=np.dtype(storage))
    if array.size == 1 and count != 1:
        array = np.repeat(array, count)
    if array.size != count:
        raise NotTaken(f"dense literal of {array.size} elements for {type_text}")
    array = array.reshape(dims)
    if element == "bf16":
        return torch.from_numpy(np.ascontiguousarray(array).reshape(array.shape)).to(torch.bfloat16)  # 0-d stays 0-d
    if element in ("f16", "f32", "f64"):
        return torch.from_numpy(array.astype(np.dtype(storage)))
    return _as_torch(array, element)


def _float(token: str, element: str) -> float:
    """A float token: decimal, or a hex bit pattern of the element type."""
    token = token.strip()
    if not token.lower().startswith("0x"):
        return float(token)
    bits = int(token, 16)
    if element == "bf16":
        return float(np.array([bits << 16], dtype="<u4").view(np.float32)[0])
    unsigned, floating = FLOAT_BITS[element]
    return float(np.array([bits], dtype=unsigned).view(floating)[0])


def _as_torch(array: np.ndarray, element: str) -> torch.Tensor:
    tensor = torch.from_numpy(np.array(array))  # a writable copy
    return tensor.view(torch.bfloat16) if element == "bf16" else tensor


def read_program(path: Path, name: str) -> Program:
    """The program at `path` rewritten to return what its checks check, or NotTaken."""
    text = path.read_text()
    if SPLIT in text:  # `-split-input-file`: modules checked by `check.*_const`, and the one with @main
        text = next((chunk for chunk in text.split(SPLIT) if "@main(" in chunk), text)
    span = _function(text, "main")
    if span is None:
        raise NotTaken("no @main")
    main = text[span[0] : span[1]]
    header = main.splitlines()[0]
    if not re.search(r"@main\(\)", header):
        raise NotTaken(MAIN_ARGS)
    lines = main.splitlines()
    constants = {m.group(1): (m.group(2), m.group(3)) for line in lines if (m := _CONSTANT.match(line))}
    calls: dict[str, int] = {}  # `%1` or `%1#0` -> index of @expected()'s result
    for line in lines:
        if m := re.match(r"^\s*(%\w+)(?::(\d+))? = (?:func\.)?call @expected\(\)", line):
            count = int(m.group(2) or 1)
            calls.update({m.group(1): 0} if count == 1 else {f"{m.group(1)}#{i}": i for i in range(count)})
    expected_values = _expected_function(text) if calls else []
    checks, expected, kept = [], [], []
    for line in lines:
        if '"check.' in line:
            raise NotTaken(CONST_CHECK)
        if "@check." not in line:
            kept.append(line)
            continue
        m = _CHECK.match(line)
        if m is None:
            raise NotTaken(UNREADABLE)
        kind, operands, attributes, types = m.group(1), split_types(m.group(2)), m.group(3) or "", m.group(4)
        if kind not in KINDS or len(operands) != 2:
            raise NotTaken(f"check.{kind} with {len(operands)} operands")
        types_list = split_types(types)
        side = next((i for i, o in enumerate(operands) if o in calls or o in constants), None)
        if side is None:
            raise NotTaken(COMPUTED_EXPECTED)
        computed, given = operands[1 - side], operands[side]
        value = expected_values[calls[given]] if given in calls else dense_values(*constants[given])
        attrs = {k: float(v) for k, v in _ATTRIBUTE.findall(attributes)}
        checks.append(Check(kind, computed, given, types_list[1 - side], attrs))
        expected.append(value)
    if not checks:
        raise NotTaken(NO_CHECK)
    elements = [tensor_type(check.type)[1] for check in checks]
    for element in elements:
        if element not in ELEMENTS:
            raise NotTaken(NO_TORCH_ELEMENT.format(element))
    result_types = ", ".join(check.type for check in checks)
    rewritten = []
    for line in kept:
        if re.match(r"^\s*(?:func\.)?return\b", line):
            indent = line[: len(line) - len(line.lstrip())]
            line = f"{indent}return {', '.join(c.computed for c in checks)} : {result_types}"
        rewritten.append(line)
    body = "\n".join(rewritten[1:])
    new_header = f"  func.func public @main() -> ({result_types}) {{"
    new_main = new_header + "\n" + body
    text = text[: span[0]] + new_main + text[span[1] :]
    text = re.sub(r"^module @[\w.$-]+", "module", text, count=1, flags=re.M)  # IREE names its VM module so
    return Program(name, text, checks, expected, elements)


def _expected_function(text: str) -> list[torch.Tensor]:
    span = _function(text, "expected")
    if span is None:
        raise NotTaken(COMPUTED_EXPECTED)
    lines = text[span[0] : span[1]].splitlines()
    constants = {m.group(1): (m.group(2), m.group(3)) for line in lines if (m := _CONSTANT.match(line))}
    returned = next((line for line in lines if re.match(r"^\s*(?:func\.)?return\b", line)), None)
    if returned is None:
        raise NotTaken(COMPUTED_EXPECTED)
    names = split_types(returned.strip().removeprefix("func.").removeprefix("return").split(" : ")[0])
    if any(name not in constants for name in names):
        raise NotTaken(COMPUTED_EXPECTED)
    return [dense_values(*constants[name]) for name in names]


# --- the checks' comparisons -------------------------------------------------------------


MANTISSA_BITS = {16: 10, 32: 23, 64: 52}  # of the IEEE type of a width (bf16: 7, by dtype)


def _float_parts(tensor: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray, int, int]]:
    """(values as float64, bit patterns as uint64, width, mantissa bits) of a float tensor;
    complex: of each part."""
    if tensor.is_complex():
        return _float_parts(tensor.real.contiguous()) + _float_parts(tensor.imag.contiguous())
    width = tensor.element_size() * 8
    mantissa = 7 if tensor.dtype == torch.bfloat16 else MANTISSA_BITS[width]
    bits = tensor.contiguous().view({16: torch.int16, 32: torch.int32, 64: torch.int64}[width]).numpy()
    bits = bits.view({16: np.uint16, 32: np.uint32, 64: np.uint64}[width]).astype(np.uint64)
    return [(tensor.to(torch.float64).numpy(), bits, width, mantissa)]


def ulp_distance(a_bits: np.ndarray, b_bits: np.ndarray, width: int, mantissa: int) -> np.ndarray:
    """StableHLO's `ULPDifference` (stablehlo/tests/CheckOps.cpp), element by element: 0
    for equal bit patterns; for two finite values the difference of their magnitudes' bit
    patterns, or their sum across zero; two NaNs 0; anything else (an infinity against
    another value, a NaN against a number) the largest distance."""
    sign = np.uint64(1) << np.uint64(width - 1)
    a, b = a_bits & ~sign, b_bits & ~sign
    infinity = np.uint64(((1 << (width - 1 - mantissa)) - 1) << mantissa)
    finite = (a < infinity) & (b < infinity)
    both_nan = (a > infinity) & (b > infinity)
    opposite = ((a_bits & sign) != 0) != ((b_bits & sign) != 0)
    same_side = np.where(a > b, a - b, b - a)
    across = a + b  # below 2**64: each is below 2**(width - 1)
    largest = np.iinfo(np.uint64).max
    distance = np.where(finite, np.where(opposite, across, same_side), np.where(both_nan, np.uint64(0), largest))
    return np.where(a_bits == b_bits, np.uint64(0), distance)


def _almost_equal(a: np.ndarray, e: np.ndarray, tolerance: float) -> np.ndarray:
    """StableHLO's `areApproximatelyEqual` (stablehlo/reference/Element.cpp) on float64
    values: equal, both NaN, or both finite and within `tolerance`."""
    with np.errstate(invalid="ignore"):
        near = np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= tolerance)
        return (a == e) | (np.isnan(a) & np.isnan(e)) | near


def compare(check: Check, actual: torch.Tensor, expected: torch.Tensor) -> str | None:
    """None when `actual` passes `check` against `expected`; else what fails, briefly."""
    if tuple(actual.shape) != tuple(expected.shape):
        return f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.numel() == 0:
        return None
    floating = actual.is_floating_point() or actual.is_complex()
    if not floating:
        bad = (actual != expected).numpy()
        return _report(bad, actual, expected, "not equal") if bad.any() else None
    parts = list(zip(_float_parts(actual), _float_parts(expected)))  # complex: real, then imaginary
    if check.kind == "expect_eq":
        failing = np.any([~((a == e) | (np.isnan(a) & np.isnan(e))) for (a, *_), (e, *_) in parts], axis=0)
        detail = "not equal"
    elif check.kind in ALMOST_EQ_TOLERANCE:
        tolerance = ALMOST_EQ_TOLERANCE[check.kind]
        failing = np.any([~_almost_equal(a, e, tolerance) for (a, *_), (e, *_) in parts], axis=0)
        detail = f"not within {tolerance} (absolute)"
    else:  # expect_close: a complex element's distance is its parts' larger one
        distance = np.max([ulp_distance(ab, eb, w, m) for (_, ab, w, m), (_, eb, _, _) in parts], axis=0)
        failing = distance > np.uint64(MAX_ULP)
        detail = f"ULP distance above {MAX_ULP} (largest {int(distance.max())})"
    return _report(failing, actual, expected, detail) if failing.any() else None


def _report(bad: np.ndarray, actual: torch.Tensor, expected: torch.Tensor, detail: str) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} elements: {detail}; first at {list(index)}: "
        f"got {actual[index].item()!r}, expected {expected[index].item()!r}"
    )
