"""A compiled program runs only on what it was compiled for, and says so otherwise."""

from __future__ import annotations

import pytest
import torch

from compiler.compiled_module import compile_module
from compiler.stages import StageError


class ScaleAndCount(torch.nn.Module):
    def forward(self, x, counts):
        return x * 2, counts + 1


@pytest.fixture(scope="module")
def compiled():
    x, counts = torch.rand(3, 4), torch.ones(3, dtype=torch.int64)
    program = compile_module(ScaleAndCount(), (x, counts), backend="linalg", dynamic_dims=[[-1, 4], [-1]])
    yield program
    program.close()


def test_dynamic_dims_take_other_sizes(compiled):
    x, counts = torch.rand(5, 4), torch.arange(5)
    doubled, incremented = compiled(x, counts)
    torch.testing.assert_close(doubled, x * 2)
    torch.testing.assert_close(incremented, counts + 1)


@pytest.mark.parametrize(
    "x, counts, complaint",
    [
        (
            torch.rand(5, 3),
            torch.arange(5),
            "argument 0 is float32[5, 3] but the program was compiled for tensor<?x4xf32>: dim 1 is static 4",
        ),
        (
            torch.rand(5, 4, 1),
            torch.arange(5),
            "argument 0 is float32[5, 4, 1] but the program was compiled for tensor<?x4xf32>: rank 2 expected",
        ),
        (
            torch.rand(5, 4).double(),
            torch.arange(5),
            "argument 0 is float64[5, 4] but the program was compiled for tensor<?x4xf32>: element type f32 expected",
        ),
        (
            torch.rand(5, 4),
            torch.arange(5).int(),
            "argument 1 is int32[5] but the program was compiled for tensor<?xi64>: element type i64 expected",
        ),
    ],
    ids=["static-dim", "rank", "float-dtype", "int-dtype"],
)
def test_other_inputs_are_refused_before_running(compiled, x, counts, complaint):
    with pytest.raises(StageError) as raised:
        compiled(x, counts)
    assert raised.value.stage == "execute"
    assert raised.value.message.startswith(complaint)


def test_argument_count_is_checked(compiled):
    with pytest.raises(StageError, match="the program takes 2 tensors, 1 were given"):
        compiled.program(torch.rand(3, 4))
