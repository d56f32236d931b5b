"""Seeded input makers for tests (the `tu` argument of invokers)."""

from __future__ import annotations

import zlib

import torch


def seed_for(test_name: str) -> int:
    """A stable per-test seed: the same inputs whatever order tests run in."""
    return zlib.crc32(test_name.encode())


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
        torch.manual_seed(seed + 1)

    def rand(self, *shape: int, low: float = 0.0, high: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
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

    def bools(self, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator) < 0.5
