"""Compare a config's trace with the golden trace.

Tolerances live in one table keyed by dtype (`TOLERANCES`), overridable per test.
Integers and bools compare exactly; NaN positions must match; the relative error is
never divided by a golden zero. A mismatch says where (trace item, output path),
what kind (values, shape, dtype, nan, structure), the max abs/rel error, how many
elements differ and the first differing index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from e2e.framework.registry import Tolerance
from e2e.framework.trace import Trace

TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(rtol=1e-7, atol=1e-9),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-5),
    torch.float16: Tolerance(rtol=1e-2, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-2),
    torch.complex128: Tolerance(rtol=1e-7, atol=1e-9),
    torch.complex64: Tolerance(rtol=1e-4, atol=1e-5),
}
EXACT = Tolerance(rtol=0.0, atol=0.0)


@dataclass
class Mismatch:
    kind: str  # values | shape | dtype | nan | structure | type
    where: str  # "trace item #0 (forward) @ output[1]"
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} mismatch @ {self.where}: {self.detail}"


def tolerance_for(dtype: torch.dtype, override: Tolerance | None) -> Tolerance:
    if not (dtype.is_floating_point or dtype.is_complex):
        return EXACT
    return override or TOLERANCES.get(dtype, TOLERANCES[torch.float32])


# Elements compared at a time: widening to float64 costs 8 bytes an element, so a
# 512 MiB fp16 output compared at once would need several GiB of temporaries.
CHUNK = 1 << 22


def _flat_index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def _chunks(golden: torch.Tensor, actual: torch.Tensor):
    g, a = golden.detach().reshape(-1), actual.detach().reshape(-1)
    for start in range(0, g.numel(), CHUNK):
        yield start, g[start : start + CHUNK], a[start : start + CHUNK]


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-width floats widen (exactly) to float32 so tolerances are not rounded away."""
    if dtype.is_floating_point and torch.finfo(dtype).bits < 32:
        return torch.float32
    return dtype


def compare_tensors(golden: torch.Tensor, actual: Any, where: str, override: Tolerance | None) -> Mismatch | None:
    if not isinstance(actual, torch.Tensor):
        return Mismatch("type", where, f"expected a tensor, got {type(actual).__name__}")
    if actual.dtype != golden.dtype:
        return Mismatch("dtype", where, f"expected {golden.dtype}, got {actual.dtype}")
    if actual.shape != golden.shape:
        return Mismatch("shape", where, f"expected {list(golden.shape)}, got {list(actual.shape)}")
    tol = tolerance_for(golden.dtype, override)
    floating = golden.dtype.is_floating_point or golden.dtype.is_complex
    work = _working_dtype(golden.dtype)
    counts = {"nan": 0, "values": 0}
    first: dict[str, int] = {}
    for start, g, a in _chunks(golden, actual):
        if floating:
            g, a = g.to(work), a.to(work)
            # isclose: |a - g| <= atol + rtol * |g|, and infinities must match exactly.
            found = {
                "nan": torch.isnan(g) != torch.isnan(a),
                "values": ~torch.isclose(a, g, rtol=tol.rtol, atol=tol.atol, equal_nan=True),
            }
        else:
            found = {"values": a != g}
        for kind, mask in found.items():
            if mask.any():
                counts[kind] += int(mask.sum())
                first.setdefault(kind, start + int(mask.nonzero()[0]))
    if "nan" in first:
        index = _flat_index(first["nan"], golden.shape)
        return Mismatch("nan", where, f"{counts['nan']} NaN positions differ, first at index {index}")
    if "values" not in first:
        return None
    # The error magnitudes over every element (floats in the working dtype, integers and
    # bools in float64, where a difference cannot overflow): failures only.
    report = work if floating else torch.float64
    max_abs, max_rel = 0.0, float("nan")
    for _, g, a in _chunks(golden, actual):
        g, a = g.to(report), a.to(report)
        diff = torch.where((a == g) | torch.isnan(g), 0.0, (a - g).abs())
        max_abs = max(max_abs, diff.max().item())
        magnitude = g.abs()
        nonzero = magnitude > 0
        if nonzero.any():
            rel = torch.where(nonzero, diff / torch.where(nonzero, magnitude, 1.0), 0.0).max().item()
            max_rel = rel if max_rel != max_rel else max(max_rel, rel)
    index = _flat_index(first["values"], golden.shape)
    return Mismatch(
        "values",
        where,
        f"{counts['values']} of {golden.numel()} elements differ (rtol={tol.rtol}, atol={tol.atol}); "
        f"max abs error {max_abs:.6g}, max rel error {max_rel:.6g} (over nonzero golden); "
        f"first at index {index}: expected {golden[index].item()}, got {actual[index].item()}",
    )


def compare_values(golden: Any, actual: Any, where: str, override: Tolerance | None) -> Mismatch | None:
    if isinstance(golden, torch.Tensor):
        return compare_tensors(golden, actual, where, override)
    if golden is None:
        return None if actual is None else Mismatch("type", where, f"expected None, got {type(actual).__name__}")
    if isinstance(golden, (bool, int, float)):
        if isinstance(actual, torch.Tensor) and actual.numel() == 1:
            actual = actual.item()
        if not isinstance(actual, (bool, int, float)):
            return Mismatch("type", where, f"expected a Python {type(golden).__name__}, got {type(actual).__name__}")
        dtype = torch.float64 if isinstance(golden, float) else torch.int64
        return compare_tensors(torch.tensor(golden, dtype=dtype), torch.tensor(actual, dtype=dtype), where, override)
    if isinstance(golden, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(golden):
            got = (
                f"{type(actual).__name__} of {len(actual)}"
                if isinstance(actual, (tuple, list))
                else type(actual).__name__
            )
            return Mismatch("structure", where, f"expected {type(golden).__name__} of {len(golden)}, got {got}")
        for i, (g, a) in enumerate(zip(golden, actual)):
            if (mismatch := compare_values(g, a, f"{where}[{i}]", override)) is not None:
                return mismatch
        return None
    if isinstance(golden, dict):
        if not isinstance(actual, dict) or set(actual) != set(golden):
            return Mismatch("structure", where, f"expected dict with keys {sorted(golden)}, got {actual!r:.80}")
        for key in golden:
            if (mismatch := compare_values(golden[key], actual[key], f"{where}[{key!r}]", override)) is not None:
                return mismatch
        return None
    return Mismatch(
        "type",
        where,
        f"the test returned a {type(golden).__name__}; outputs must be tensors, Python scalars, None, "
        "or tuples, lists and dicts of them",
    )


def compare_traces(golden: Trace, actual: Trace, override: Tolerance | None = None) -> Mismatch | None:
    """The first mismatch between two traces, or None when they agree."""
    if len(golden) != len(actual):
        return Mismatch("structure", "trace", f"expected {len(golden)} calls, got {len(actual)}")
    for i, (g, a) in enumerate(zip(golden, actual)):
        where = f"trace item #{i} ({g.method}) @ output"
        if (mismatch := compare_values(g.outputs, a.outputs, where, override)) is not None:
            return mismatch
    return None
