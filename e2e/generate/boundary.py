"""Boundary draws: inputs where a compiler's off-by-one shows (docs/generate.md).

A program drawn continuously never sees two equal floats, an exact zero or a half: a `>`
lowered as `>=`, the last of equal maxima picked instead of the first, a half rounded
away from zero, all pass. A share of programs (`BOUNDARY_SHARE`, by seed) draws its
inputs from a small palette instead (the seed's uniform program, its inputs drawn again
where it stays valid: `grow.boundary_twin`): 2 to 4 values a tensor, taken from the halves in
[-2.5, 2.5], -0.0, and its op's domain edges (sqrt's 0, a divisor's +-0.25, asin's
+-0.95), opening with the program's own first values (`ranking`, so that two operands tie,
not only a tensor with itself), holding one of the points of an op that reads it (where its
rule alone decides: `ops.OpSpec.points`, round's even halves, sign's zero), and NaN besides
in three tensors of four where the op's contract says what a NaN does (an IEEE comparison,
`amax`'s propagation: `ops.OpSpec.takes_nan`); integers from -3..3 and, for one input in
two, the type's extremes; the first row sometimes repeated. Ties and exact zeros then occur in most
tensors, and across the two operands of half the comparisons.

A tie is only a fact if no rounding came before it: the grower lets an op's result sit
on a discontinuity (`stable`: a comparison of equal values, argmax of a tie, floor of an
integer) only when every operand is *exact*, equal to its mathematical value on every
correct compiler (`exact_result`): an input; a value moved, selected or rounded to an
integer (`MOVES`); one correctly rounded operation whose result is representable
(`ROUNDS_ONCE`: add, mul... equal to the float64 program's); a sum whose every partial
sum, in any order, is representable (`ACCUMULATES`: its terms on a grid of 2^-g, the sum
of their magnitudes below 2^p of the dtype's precision).
"""

from __future__ import annotations

import math
import os
from random import Random

import torch

from e2e.framework.testutils import TestUtils
from e2e.generate.types import Domain, is_float, torch_dtype

# Half the programs: each half finds what the other cannot. Boundary programs catch the
# boundary miscompiles (ties, zeros, halves) no continuous draw reaches; continuous ones
# keep every value of an op's range (a precision bug, a polynomial's error, the rounding
# of a value no palette holds). Both are the same programs otherwise (`grow.boundary_twin`).
BOUNDARY_SHARE = 0.5
SHARE_ENV = "E2E_GENERATE_BOUNDARY_SHARE"  # `pytest --generate-boundary-share`, `e2e.fuzz --boundary-share`

UNIFORM, BOUNDARY = "uniform", "boundary"  # how an input's values are drawn (`InputSpec.values`)
HALVES = tuple(k / 2 for k in range(-5, 6))
# The values every tensor of a program may share (`ranking`): a float pool's halves and -0.0,
# an integer pool's -3..3.
SHARED = (*HALVES, -0.0, -3.0, 3.0)
PALETTE = (2, 4)  # values a tensor draws from, at least and at most
# Exact operands: how an op's result keeps exactness (`OpSpec.exact`).
MOVES, ROUNDS_ONCE, ACCUMULATES = "moves", "rounds once", "accumulates"
PRECISION = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8, torch.float64: 53}


def boundary_share() -> float:
    """The share of programs drawn at the boundaries: `$E2E_GENERATE_BOUNDARY_SHARE`, else
    `BOUNDARY_SHARE`."""
    text = os.environ.get(SHARE_ENV, "")
    return float(text) if text else BOUNDARY_SHARE


def is_boundary(seed: int, share: float) -> bool:
    """Whether the program of `seed` draws at the boundaries. By the seed alone, nested: a
    boundary program at one share is one at every larger share."""
    return Random(f"e2e.generate/{seed}/boundary").random() < share


def float_pool(dtype: str, domain: Domain) -> list[float]:
    """The values a float input inside `domain` may draw: halves, -0.0 and the domain's
    edges, those that still lie in it as `dtype` values."""
    low = domain.low if domain.low is not None else -3.0
    high = domain.high if domain.high is not None else 3.0
    candidates = [*HALVES, -0.0]
    candidates += [e for e in (domain.low, domain.high) if e is not None and abs(e) <= 16]
    if domain.min_abs:
        candidates += [domain.min_abs, -domain.min_abs]
    pool = []
    for value in candidates:
        cast = torch.tensor([value], dtype=torch_dtype(dtype))
        if low <= value <= high and domain.holds(cast) and not any(_same(value, p) for p in pool):
            pool.append(float(cast.item()))
    return pool


def _same(a: float, b: float) -> bool:
    return a == b and str(a) == str(b)  # -0.0 is its own value


def int_pool(dtype: str, domain: Domain, extremes: bool) -> list[int]:
    """The values an integer input inside `domain` may draw: -3..3, and the type's extremes."""
    info = torch.iinfo(torch_dtype(dtype))
    candidates = list(range(-3, 4)) + ([info.min, info.min + 1, info.max - 1, info.max] if extremes else [])
    candidates += [int(e) for e in (domain.low, domain.high) if e is not None]  # an index's 0 and n - 1
    low = int(domain.low) if domain.low is not None else info.min
    high = int(domain.high) if domain.high is not None else info.max
    pool = list(dict.fromkeys(v for v in candidates if low <= v <= high and abs(v) >= domain.min_abs))
    return pool or [max(low, min(high, 0))]


def ranking(seed: int) -> tuple[float, ...]:
    """A program's own order of the values its tensors share (`SHARED`): each tensor's
    palette opens with the first ones in it that its domain holds, so two operands of a
    comparison tie where uniformly drawn palettes would miss each other. By the seed alone:
    the ranking moves no input's stream."""
    shared = list(SHARED)
    Random(f"e2e.generate/{seed}/ranking").shuffle(shared)
    return tuple(shared)


def _rank(value: float, order: tuple[float, ...]) -> int:
    return next((k for k, v in enumerate(order) if _same(float(value), v)), len(order))


def draw(
    tu: TestUtils,
    shape: tuple[int, ...],
    dtype: str,
    domain: Domain,
    order: tuple[float, ...] = (),
    points: tuple[float, ...] = (),
) -> torch.Tensor:
    """A boundary input: values from a palette of the pool (NaN one of them in three tensors
    of four, where `domain` allows NaN), the first row sometimes repeated. The palette's
    first 1 to all values are the pool's first in the program's `order` (`ranking`), the
    rest drawn from the others; one of `points` (`OpSpec.points`) is in it too."""
    if dtype == "bool":
        return tu.bools(*shape)
    if is_float(dtype):
        pool = torch.tensor(float_pool(dtype, domain) or [domain.clamp_bounds()[0] or 0.0], dtype=torch_dtype(dtype))
    else:
        extremes = bool(tu.randint(low=0, high=2).item())
        pool = torch.tensor(int_pool(dtype, domain, extremes), dtype=torch_dtype(dtype))
    size = min(len(pool), int(tu.randint(low=PALETTE[0], high=PALETTE[1] + 1).item()))
    shared = int(tu.randint(low=1, high=size + 1).item())
    ranked = sorted(range(len(pool)), key=lambda k: _rank(pool[k].item(), order))
    others = ranked[shared:]
    picked = torch.randperm(len(others), generator=tu.generator)[: size - shared].tolist()
    palette = pool[ranked[:shared] + [others[k] for k in picked]]
    points = [p for p in points if is_float(dtype) and domain.holds(torch.tensor([p]))]
    if points and not any(_same(v, p) for v in palette.tolist() for p in points):
        point = points[int(tu.randint(low=0, high=len(points)).item())]
        palette = torch.cat([palette, palette.new_full((1,), point)])  # where an op reading it decides
    nan = domain.nan and is_float(dtype) and int(tu.randint(low=0, high=4).item()) != 0
    if nan:  # an op whose contract says what a NaN does: three tensors in four hold some
        palette = torch.cat([palette, palette.new_full((1,), math.nan)])  # besides the shared values
    values = palette[tu.randint(*shape, low=0, high=len(palette))]
    if len(shape) >= 1 and shape[0] > 1 and bool(tu.randint(low=0, high=2).item()):
        values[1] = values[0]  # a repeated row
    if nan and values.numel() > 1 and not bool(values.isnan().any()):
        values.view(-1)[int(tu.randint(low=0, high=values.numel()).item())] = math.nan  # a small tensor's too
    return values


def grid(value: torch.Tensor) -> int | None:
    """The least g with every element a multiple of 2^-g (at most 12), or None."""
    wide = value.double()
    for g in range(13):
        scaled = wide * 2.0**g
        if torch.equal(scaled, scaled.round()):
            return g
    return None


def representable_sums(operands: list[torch.Tensor], magnitudes: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether every partial sum of an accumulation is exact in `dtype`, whatever its order:
    its terms (products of the operands' elements) lie on the grid of the operands' grids
    added up, and the sum of their magnitudes (`magnitudes`: the op on |operands|) stays
    below 2^p on that grid."""
    grids = [grid(o) for o in operands if o.is_floating_point()]
    if any(g is None for g in grids):
        return False
    step = 2.0 ** -sum(grids)
    bound = float(magnitudes.abs().max()) if magnitudes.numel() else 0.0
    return bound / step < 2.0 ** PRECISION.get(dtype, 0)
