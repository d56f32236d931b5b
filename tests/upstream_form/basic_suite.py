# A test_suite file in upstream torch-mlir's form (imports and decorators unchanged),
# loaded by tests/test_upstream_compat.py.
import torch

from torch_mlir_e2e_test.annotations import annotate_args, export
from torch_mlir_e2e_test.framework import TestUtils
from torch_mlir_e2e_test.registry import register_test_case


class AddmmModule(torch.nn.Module):
    def __init__(self):
        super().__init__()

    @export
    @annotate_args(
        [
            None,
            ([-1, -1], torch.float32, True),
            ([-1, -1], torch.float32, True),
            ([-1, -1], torch.float32, True),
        ]
    )
    def forward(self, a, b, c):
        return torch.addmm(a, b, c, beta=0.5)


@register_test_case(module_factory=lambda: AddmmModule())
def AddmmModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 5), tu.rand(3, 4), tu.rand(4, 5))


@register_test_case(module_factory=lambda: AddmmModule(), timeout_seconds=15)
def AddmmModule_shortDeadline(module, tu: TestUtils):
    module.forward(tu.rand(2, 2, low=-1.0, high=1.0), tu.rand(2, 3), tu.rand(3, 2))


class RandLikeMeanModule(torch.nn.Module):
    """A statistical test: the mean of 64k uniform samples is 0.5 within upstream's tolerance."""

    def __init__(self):
        super().__init__()

    @export
    @annotate_args([None, ([-1, -1], torch.float64, True)])
    def forward(self, x):
        return torch.rand_like(x).mean().round(decimals=2)


@register_test_case(module_factory=lambda: RandLikeMeanModule())
def RandLikeMeanModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(256, 256).double())


class RemainderIntModule(torch.nn.Module):
    def __init__(self):
        super().__init__()

    @export
    @annotate_args([None, ([-1, -1], torch.int32, True), ([-1, -1], torch.int32, True)])
    def forward(self, a, b):
        return torch.remainder(a, b)


@register_test_case(module_factory=lambda: RemainderIntModule())
def RemainderIntModule_basic(module, tu: TestUtils):
    module.forward(tu.randint(3, 4, high=10, dtype=torch.int32), tu.randint(3, 4, high=10, dtype=torch.int32))
