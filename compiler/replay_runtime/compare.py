"""Compare tensors: the tolerance table keyed by dtype, and what a mismatch says.

Integers and bools compare exactly; NaN positions must match; the relative error is
never divided by a golden zero. A mismatch says where, what kind (values, shape,
dtype, nan, type), the max abs/rel error, how many elements differ and the first
differing index.

The kind is `nan` only when NaN placement is all that is wrong (a NaN not propagated,
or made from numbers). Wrong numbers among the rest make it `values`, whatever else
differs: a program that reads memory it never wrote shows NaN on some runs and not on
others, and its kind must not change with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(rtol=1e-7, atol=1e-9),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-5),
    torch.float16: Tolerance(rtol=1e-2, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-2),
    torch.complex128: Tolerance(rtol=1e-7, atol=1e-9),
    torch.complex64: Tolerance(rtol=1e-4, atol=1e-5),
    torch.complex32: Tolerance(rtol=1e-2, atol=1e-3),  # f16 parts: float16's
    # float8 compares exactly, as torch.testing compares it: one step is 6-25% of a value.
    **{
        dtype: Tolerance(rtol=0.0, atol=0.0)
        for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)
    },
}
EXACT = Tolerance(rtol=0.0, atol=0.0)


@dataclass
class Mismatch:
    kind: str  # values | shape | dtype | nan | structure | type
    where: str  # "trace item #0 (forward) @ output[1]"
    detail: str
    call: int | None = None  # the index of the trace item that mismatched, when traces were compared

    def __str__(self) -> str:
        return f"{self.kind} mismatch @ {self.where}: {self.detail}"


def tolerance_for(dtype: torch.dtype, override: Tolerance | None) -> Tolerance:
    if not (dtype.is_floating_point or dtype.is_complex):
        return EXACT
    return override or TOLERANCES.get(dtype, TOLERANCES[torch.float32])


# Elements compared at a time: widening to float64 costs 8 bytes an element, so a
# 512 MiB fp16 output compared at once would need several GiB of temporaries. On a 2-core
# AMD EPYC, chunks of 2^20 compared a 67M-element fp16 output faster than chunks of 2^22
# and about as fast as smaller ones (`benchmarks/compare_large.py` measures a machine).
CHUNK = 1 << 20


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
    """Half-width floats widen (exactly) to float32 so tolerances are not rounded away;
    complex<f16> to complex64 (torch has few complex32 kernels: no abs, no equal)."""
    if dtype.is_floating_point and torch.finfo(dtype).bits < 32:
        return torch.float32
    return torch.complex64 if dtype == torch.complex32 else dtype


def compare_tensors(
    golden: torch.Tensor, actual: Any, where: str, override: Tolerance | None, *, first_only: bool = False
) -> Mismatch | None:
    """The mismatch of `actual` against `golden`, or None when they agree.

    `first_only`: stop at the first chunk that differs, for a caller that needs only
    whether they agree (the capture check): the Mismatch's kind and detail then describe
    that chunk alone, not the whole tensor."""
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
    equal_kernel = golden.dtype != torch.complex32  # torch has no `equal` for complex<f16>
    for start, g, a in _chunks(golden, actual):
        # Equal elements (no NaN among them: NaN != NaN) pass every check below; one pass
        # over the raw dtype instead of a dozen over the widened one.
        if equal_kernel and torch.equal(g, a):
            continue
        if floating:
            g, a = g.to(work), a.to(work)
            # isclose: |a - g| <= atol + rtol * |g|, and infinities must match exactly.
            nan = torch.isnan(g) != torch.isnan(a)
            found = {"nan": nan, "values": ~nan & ~torch.isclose(a, g, rtol=tol.rtol, atol=tol.atol, equal_nan=True)}
        else:
            found = {"values": a != g}
        for kind, mask in found.items():
            if count := int(torch.count_nonzero(mask)):
                counts[kind] += count
                if kind not in first:  # `nonzero` lists every difference: only for the first chunk with one
                    first[kind] = start + int(mask.nonzero()[0])
        if first_only and first:
            kind = "values" if "values" in first else "nan"
            return Mismatch(kind, where, f"first difference at index {_flat_index(first[kind], golden.shape)}")
    nan_note = (
        f"{counts['nan']} NaN positions differ, first at index {_flat_index(first['nan'], golden.shape)}"
        if "nan" in first
        else ""
    )
    if "values" not in first:
        return Mismatch("nan", where, nan_note) if nan_note else None
    # The error magnitudes over every element (floats in the working dtype, integers and
    # bools in float64, where a difference cannot overflow): failures only.
    report = work if floating else torch.float64
    max_abs, max_rel = 0.0, float("nan")
    for _, g, a in _chunks(golden, actual):
        g, a = g.to(report), a.to(report)
        diff = torch.where((a == g) | torch.isnan(g) | torch.isnan(a), 0.0, (a - g).abs())
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
        f"first at index {index}: expected {golden[index].item()}, got {actual[index].item()}"
        + (f"; {nan_note}" if nan_note else ""),
    )
