"""Property families as data, so the e2e suite runs them too (`e2e/test_suite/properties.py`).

A family draws an example's parameters from a hypothesis strategy and builds a test
from them: the function, its inputs from a seeded `TestUtils`, and whether its dims are
dynamic. `examples` draws a family's examples the way a derandomized profile does, so
each registered name (`Property_<family>_<k>`) is the same case on every run.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable

import torch
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from e2e.properties import strategies as s

Built = tuple[Callable[..., Any], Callable[[Any], list[torch.Tensor]], bool]  # fn, inputs(tu), dynamic


@dataclass(frozen=True)
class Family:
    name: str
    strategy: st.SearchStrategy
    build: Callable[[Any], Built]


def _unary(args) -> Built:
    (op, dtype), shape, boundary, dynamic = args
    return op.fn, lambda tu: [s.make_input(tu, shape, dtype, op, boundary)], dynamic


def _binary(args) -> Built:
    (op, dtype), shapes, boundary, dynamic = args
    return op.fn, lambda tu: [s.make_input(tu, shape, dtype, op, boundary) for shape in shapes], dynamic


def _reduction(args) -> Built:
    op, (shape, dim, keepdim), boundary, dynamic = args
    return (
        lambda t: op.fn(t, dim, keepdim=keepdim),
        lambda tu: [s.make_input(tu, shape, torch.float32, op, boundary)],
        dynamic,
    )


def _pool2d(args) -> Built:
    case, boundary = args
    return (
        lambda t: s.pool2d(t, case),
        lambda tu: [s.make_input(tu, (1, 2, *case["size"]), torch.float32, None, boundary)],
        False,
    )


def _compare(args) -> Built:
    (op, dtype), shapes, dynamic = args
    # boundary values always: a comparison is only tested where its operands tie
    return op.fn, lambda tu: [s.make_input(tu, shape, dtype, None, True) for shape in shapes], dynamic


FAMILIES = (
    Family("unary", st.tuples(s.op_and_dtype(s.UNARY), s.shapes(), s.boundary_inputs, st.booleans()), _unary),
    Family(
        "binary", st.tuples(s.op_and_dtype(s.BINARY), s.broadcast_pair(), s.boundary_inputs, st.booleans()), _binary
    ),
    Family(
        "reduction",
        st.tuples(st.sampled_from(s.REDUCTIONS), s.reduction_case(), s.boundary_inputs, st.booleans()),
        _reduction,
    ),
    Family("pool2d", st.tuples(s.pool2d_case(), s.boundary_inputs), _pool2d),
    Family("compare", st.tuples(s.op_and_dtype(s.COMPARISONS), s.broadcast_pair(), st.booleans()), _compare),
)


def examples(family: Family, count: int) -> list[Any]:
    """The first `count` examples a run seeded by the family's name draws.

    Seeded by the name, not `derandomize` (which hashes this function's source, so a
    reformatting re-drew every case): `Property_<family>_<k>` names one case for as
    long as the strategy and the pinned hypothesis stay the same."""
    found: list[Any] = []

    @seed(zlib.crc32(family.name.encode()))
    @settings(max_examples=count, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(family.strategy)
    def collect(args):
        found.append(args)

    collect()
    return found[:count]
