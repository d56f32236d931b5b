"""Hypothesis strategies for the property families: shapes, dtypes, ops and layer parameters.

Small by construction (dims 1..4, rank 0..3) so an example compiles in well under a
second. Input values come from a seeded `TestUtils`: the seed is drawn, so hypothesis
shrinks it too, and a failing example names its inputs exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from e2e.framework.testutils import TestUtils

MAX_DIM = 4
seeds = st.integers(min_value=0, max_value=2**16)
dims = st.integers(min_value=1, max_value=MAX_DIM)


def shapes(min_rank: int = 0, max_rank: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(dims, min_size=min_rank, max_size=max_rank).map(tuple)


@dataclass(frozen=True)
class Op:
    """A named op and the input range it is defined on (for float inputs)."""

    name: str
    fn: Callable
    low: float = -2.0
    high: float = 2.0
    ints: bool = True  # also defined on int64 with the same dtype out

    def __repr__(self) -> str:  # what a falsifying example prints
        return self.name


UNARY = [
    Op("neg", torch.neg),
    Op("abs", torch.abs),
    Op("relu", torch.relu),
    Op("exp", torch.exp, ints=False),
    Op("tanh", torch.tanh, ints=False),
    Op("sigmoid", torch.sigmoid, ints=False),
    Op("sin", torch.sin, ints=False),
    Op("log", torch.log, low=0.1, high=4.0, ints=False),
    Op("sqrt", torch.sqrt, low=0.0, high=4.0, ints=False),
    Op("floor", torch.floor, ints=False),
    Op("square", torch.square),
]
BINARY = [
    Op("add", torch.add),
    Op("sub", torch.sub),
    Op("mul", torch.mul),
    Op("maximum", torch.maximum),
    Op("minimum", torch.minimum),
    Op("div", lambda x, y: x / (y.abs() + 1), ints=False),
    Op("atan2", torch.atan2, ints=False),
]
REDUCTIONS = [
    Op("sum", torch.sum),
    Op("mean", torch.mean, ints=False),
    Op("amax", torch.amax),
    Op("amin", torch.amin),
    Op("prod", torch.prod, low=0.5, high=1.5, ints=False),
    Op("logsumexp", torch.logsumexp, ints=False),
]
COMPARISONS = [
    Op("gt", torch.gt),
    Op("ge", torch.ge),
    Op("lt", torch.lt),
    Op("le", torch.le),
    Op("eq", torch.eq),
    Op("ne", torch.ne),
    Op("maximum", torch.maximum),
    Op("minimum", torch.minimum),
    Op("clamp_half", lambda x, y: torch.clamp(x, -0.5, 0.5) + y),
    Op("where_gt", lambda x, y: torch.where(x > y, x, y)),
]
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


def make_input(
    tu: TestUtils, shape: tuple[int, ...], dtype: torch.dtype, op: Op | None = None, boundary: bool = False
) -> torch.Tensor:
    """Uniform values in the op's range, or (`boundary`) `tu.boundary` values clamped to it:
    ties, signed zeros, halfway cases, and the integer dtype's extremes."""
    low, high = (op.low, op.high) if op else (-2.0, 2.0)
    if boundary:
        values = tu.boundary(*shape, dtype=dtype)
        return values.clamp(low, high) if dtype.is_floating_point else values
    if dtype.is_floating_point:
        return tu.rand(*shape, low=low, high=high, dtype=dtype)
    return tu.randint(*shape, low=-5, high=6, dtype=dtype)


# Whether an example's inputs are uniform or boundary values (hypothesis shrinks to uniform).
boundary_inputs = st.booleans()


def op_and_dtype(ops: list[Op]) -> st.SearchStrategy[tuple[Op, torch.dtype]]:
    return st.sampled_from(ops).flatmap(
        lambda op: st.tuples(
            st.just(op), st.sampled_from([d for n, d in DTYPES.items() if op.ints or d.is_floating_point])
        )
    )


@st.composite
def broadcast_pair(draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: the second drops leading dims and sets some dims to 1."""
    left = draw(shapes())
    keep = draw(st.integers(min_value=0, max_value=len(left)))
    right = tuple(1 if draw(st.booleans()) else d for d in left[len(left) - keep :])
    return (left, right) if draw(st.booleans()) else (right, left)


@st.composite
def reduction_case(draw) -> tuple[tuple[int, ...], int | tuple[int, ...], bool]:
    shape = draw(shapes(min_rank=1))
    rank = len(shape)
    picked = draw(
        st.lists(
            st.integers(min_value=-rank, max_value=rank - 1), min_size=1, max_size=rank, unique_by=lambda d: d % rank
        )
    )
    dim = picked[0] if len(picked) == 1 else tuple(picked)
    return shape, dim, draw(st.booleans())


@st.composite
def slice_case(draw) -> tuple[tuple[int, ...], int, int, int, int]:
    """(shape, dim, start, stop, step) with a non-empty, in-range slice."""
    shape = draw(shapes(min_rank=1))
    dim = draw(st.integers(min_value=0, max_value=len(shape) - 1))
    start = draw(st.integers(min_value=0, max_value=shape[dim] - 1))
    stop = draw(st.integers(min_value=start + 1, max_value=shape[dim]))
    return shape, dim, start, stop, draw(st.integers(min_value=1, max_value=3))


@st.composite
def conv2d_case(draw) -> dict:
    groups = draw(st.sampled_from([1, 2]))
    kernel = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 2))
    padding = draw(st.integers(0, 1))
    reach = dilation * (kernel - 1) + 1
    return dict(
        batch=draw(st.integers(1, 2)),
        in_channels=groups * draw(st.integers(1, 2)),
        out_channels=groups * draw(st.integers(1, 2)),
        size=(draw(st.integers(max(1, reach - 2 * padding), 6)), draw(st.integers(max(1, reach - 2 * padding), 6))),
        kernel=kernel,
        stride=draw(st.integers(1, 2)),
        padding=padding,
        dilation=dilation,
        groups=groups,
        bias=draw(st.booleans()),
    )


@st.composite
def pool2d_case(draw) -> dict:
    kernel = draw(st.integers(1, 3))
    padding = draw(st.integers(0, kernel // 2))
    return dict(
        kind=draw(st.sampled_from(["max", "avg"])),
        kernel=kernel,
        stride=draw(st.integers(1, 3)),
        padding=padding,
        size=(draw(st.integers(kernel, 6)), draw(st.integers(kernel, 6))),
        ceil_mode=draw(st.booleans()),
    )


def pool2d(x: torch.Tensor, case: dict) -> torch.Tensor:
    pool = F.max_pool2d if case["kind"] == "max" else F.avg_pool2d
    return pool(x, case["kernel"], case["stride"], case["padding"], ceil_mode=case["ceil_mode"])
