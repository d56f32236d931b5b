"""Seeded input makers for tests (the `tu` argument of invokers)."""

from __future__ import annotations

import zlib
from typing import Sequence

import torch

# Floats an off-by-one lowering gets wrong: zero and its sign, units, rounding halfway cases.
FLOAT_BOUNDARIES = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 2.0, -3.0)


def boundary_values(
    dtype: torch.dtype = torch.float32, thresholds: Sequence[float] = (), nan: bool = False, inf: bool = False
) -> torch.Tensor:
    """The pool `TestUtils.boundary` draws from, as a 1-d tensor of `dtype`.

    Floats: `FLOAT_BOUNDARIES`, and each threshold with its neighbours in `dtype`;
    NaN and +-inf only when asked. Integers: 0, +-1, +-2, each threshold +-1, and the
    dtype's min, min + 1, max - 1, max. Bools: both.
    """
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        base = torch.tensor([*FLOAT_BOUNDARIES, *thresholds], dtype=dtype)
        edges = torch.tensor(list(thresholds), dtype=dtype)
        values = [
            base,
            torch.nextafter(edges, torch.full_like(edges, float("inf"))),
            torch.nextafter(edges, torch.full_like(edges, -float("inf"))),
        ]
        extra = [float("nan")] * nan + [float("inf"), -float("inf")] * inf
        return torch.cat([*values, torch.tensor(extra, dtype=dtype)])
    info = torch.iinfo(dtype)
    near = [v for t in thresholds for v in (t - 1, t, t + 1)]
    small = [v for v in (0, 1, -1, 2, -2, *near) if info.min <= v <= info.max]
    return torch.tensor([*small, info.min, info.min + 1, info.max - 1, info.max], dtype=dtype)


def seed_for(test_name: str) -> int:
    """A stable per-test seed: the same inputs whatever order tests run in."""
    return zlib.crc32(test_name.encode())


def seed_global_rng(seed: int) -> None:
    """Seed torch's global CPU generator, the one `torch.rand` without a generator draws
    from: for CPU tensors, all `torch.manual_seed` does. `torch.manual_seed` also queues the
    seed for each accelerator not initialized yet (CUDA, XPU, MTIA), formatting the caller's
    stack for each: ~0.5 ms a call from a pytest stack, ~1 us here, and a test's host seeds
    several times (each `TestUtils`, the module factory)."""
    torch.default_generator.manual_seed(int(seed))  # torch.manual_seed takes any number int() takes


class TestUtils:
    """Makes deterministic inputs from its own generator (never the global RNG).

    Every maker takes the shape as separate ints; no ints make a 0-d tensor. The
    global RNG is seeded too, as upstream's TestUtils does, so invokers that call
    `torch.rand` themselves are deterministic.
    """

    __test__ = False  # not a pytest class

    def __init__(self, seed: int = 0):
        self.generator = torch.Generator().manual_seed(seed)
        # A different seed: with the same one, the global stream would repeat this
        # generator's, and an op drawing from it in the test (dropout's mask) would be
        # correlated with the inputs (`DropoutTrainModule_basic` mean 0.35, not 0.5).
        seed_global_rng(seed + 1)

    def rand(
        self, *shape: int, low: float = 0.0, high: float = 1.0, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """Uniform in [low, high)."""
        values = torch.rand(shape, generator=self.generator, dtype=torch.float64)
        return (low + (high - low) * values).to(dtype)

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, dtype=torch.float64).to(dtype)

    def randint(self, *shape: int, low: int = 0, high: int = 10, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        """Uniform integers in [low, high)."""
        return torch.randint(low, high, shape, generator=self.generator, dtype=torch.int64).to(dtype)

    def nans(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full(shape, float("nan"), dtype=dtype)

    def boundary(
        self,
        *shape: int,
        dtype: torch.dtype = torch.float32,
        thresholds: Sequence[float] = (),
        nan: bool = False,
        inf: bool = False,
    ) -> torch.Tensor:
        """Values drawn from `boundary_values(dtype, thresholds, nan, inf)`: ties (values
        repeat), zeros of both signs, thresholds and their neighbours, halfway cases,
        integer extremes. Opt-in: `rand` and `randint` keep their inputs."""
        pool = boundary_values(dtype, thresholds, nan, inf)
        return pool[torch.randint(0, len(pool), shape, generator=self.generator)]

    def bools(self, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator) < 0.5
