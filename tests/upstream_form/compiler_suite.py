# Upstream-form tests of what torch.export and the FX importer hand the compiler:
# mutated inputs, scalar results, data-dependent values, backend-legal ops.
import torch

from torch_mlir_e2e_test.annotations import annotate_args, export
from torch_mlir_e2e_test.framework import TestUtils
from torch_mlir_e2e_test.registry import register_test_case


class AddInPlaceModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("tensor", torch.ones(2, 3))

    @export
    @annotate_args([None, ([-1, -1], torch.float32, True)])
    def forward(self, x):
        return torch.ops.aten.add_(x, self.tensor)


@register_test_case(module_factory=lambda: AddInPlaceModule())
def AddInPlaceModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 3))


class ArangeOutModule(torch.nn.Module):
    def __init__(self):
        super().__init__()

    @export
    @annotate_args([None, ([12], torch.int64, True)])
    def forward(self, x):
        return torch.arange(start=0, end=12, out=x)


@register_test_case(module_factory=lambda: ArangeOutModule())
def ArangeOutModule_basic(module, tu: TestUtils):
    module.forward(torch.zeros(12).to(torch.int64))


class ScalarResultsModule(torch.nn.Module):
    """int(t) is data-dependent: non-strict export refuses it, strict export takes it."""

    def __init__(self):
        super().__init__()

    @export
    @annotate_args([None, ([], torch.int64, True), ([-1], torch.float32, True)])
    def forward(self, count, x):
        return int(count) * 3, x * 2, int(count) > 2


@register_test_case(module_factory=lambda: ScalarResultsModule())
def ScalarResultsModule_basic(module, tu: TestUtils):
    module.forward(tu.randint(low=-100, high=100), tu.rand(5))


class AdaptiveMaxPool2dModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = torch.nn.AdaptiveMaxPool2d(output_size=(3, 5))

    @export
    @annotate_args([None, ([1, 4, 10, 9], torch.float32, True)])
    def forward(self, x):
        return self.pool(x)


@register_test_case(module_factory=lambda: AdaptiveMaxPool2dModule())
def AdaptiveMaxPool2dModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(1, 4, 10, 9))
