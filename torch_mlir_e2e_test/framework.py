"""`TestUtils` (and the test record) under upstream's import path.

A test in upstream's form gets upstream's own inputs: `UpstreamTestUtils` seeds the
global RNG with 0 and draws `rand` and `randint` from it exactly as upstream's
`TestUtils` does (`nans` draws nothing), so an invoker's inputs here are those its authors ran (a
`remainder` test whose divisor upstream's draw keeps nonzero keeps it nonzero here). Its
other makers (`randn`, `bools`, `boundary`) are this project's.
"""

import torch

from e2e.framework.registry import Test
from e2e.framework.testutils import TestUtils

__all__ = ["Test", "TestUtils", "UpstreamTestUtils"]


class UpstreamTestUtils(TestUtils):
    def __init__(self, seed: int = 0):
        super().__init__(seed)
        torch.manual_seed(0)  # upstream's TestUtils() does this, once per test

    def rand(self, *sizes: int, low: float = 0.0, high: float = 1.0, dtype: torch.dtype = torch.float32):
        return torch.empty(sizes, dtype=dtype).uniform_(low, high)

    def randint(self, *sizes: int, low: int = 0, high: int = 10, dtype: torch.dtype = torch.int64):
        return torch.randint(low, high, sizes, dtype=dtype)
