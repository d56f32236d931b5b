"""Normalization: batch norm (eval), layer norm, group norm, instance norm, RMS norm, normalize."""

import torch
import torch.nn.functional as F

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case


def _with_running_stats(bn: torch.nn.modules.batchnorm._BatchNorm) -> torch.nn.Module:
    """Non-trivial running statistics, so eval mode actually uses them."""
    channels = bn.num_features
    bn.running_mean.copy_(torch.linspace(-0.5, 0.5, channels))
    bn.running_var.copy_(torch.linspace(0.5, 2.0, channels))
    return bn.eval()


@e2e_test(
    inputs=lambda tu, shape: [tu.randn(*shape)],
    params={
        "BatchNorm2d": dict(make=lambda: _with_running_stats(torch.nn.BatchNorm2d(3)), shape=(2, 3, 4, 4)),
        "BatchNorm2dNoAffine": dict(
            make=lambda: _with_running_stats(torch.nn.BatchNorm2d(3, affine=False)), shape=(2, 3, 4, 4)
        ),
        "BatchNorm1d": dict(make=lambda: _with_running_stats(torch.nn.BatchNorm1d(5)), shape=(4, 5)),
        "LayerNormLastDim": dict(make=lambda: torch.nn.LayerNorm(8), shape=(2, 3, 8)),
        "LayerNormLastTwoDims": dict(make=lambda: torch.nn.LayerNorm((3, 8)), shape=(2, 3, 8)),
        "LayerNormNoAffine": dict(make=lambda: torch.nn.LayerNorm(8, elementwise_affine=False), shape=(4, 8)),
        "GroupNorm2Groups": dict(make=lambda: torch.nn.GroupNorm(2, 4), shape=(2, 4, 3, 3)),
        "GroupNormPerChannel": dict(make=lambda: torch.nn.GroupNorm(4, 4), shape=(2, 4, 5)),
        "InstanceNorm2d": dict(make=lambda: torch.nn.InstanceNorm2d(3), shape=(2, 3, 4, 4)),
        "RMSNorm": dict(make=lambda: torch.nn.RMSNorm(8), shape=(2, 3, 8)),
    },
)
class Norm(torch.nn.Module):
    def __init__(self, make, shape):
        super().__init__()
        self.norm = make()
        self.eval()

    def forward(self, x):
        return self.norm(x)


e2e_test(
    inputs=lambda tu, shape: [tu.randn(*shape)],
    name="NormDynamic",
    dynamic=True,
    params={
        "LayerNorm": dict(make=lambda: torch.nn.LayerNorm(8), shape=(3, 5, 8)),
        "BatchNorm2d": dict(make=lambda: _with_running_stats(torch.nn.BatchNorm2d(3)), shape=(2, 3, 4, 4)),
        "GroupNorm": dict(make=lambda: torch.nn.GroupNorm(2, 4), shape=(2, 4, 3, 3)),
    },
)(Norm)


op_test("Normalize_Dim1", lambda x: F.normalize(x, dim=1), lambda tu: [tu.randn(3, 6)])
op_test(
    "LayerNormFloat64",
    lambda x, w, b: F.layer_norm(x, (6,), w, b),
    lambda tu: [
        tu.randn(4, 6, dtype=torch.float64),
        tu.randn(6, dtype=torch.float64),
        tu.randn(6, dtype=torch.float64),
    ],
)
op_test(
    "NativeLayerNorm_MeanRstd",
    lambda x: torch.ops.aten.native_layer_norm(x, [6], None, None, 1e-5),
    lambda tu: [tu.randn(3, 6)],
)


class BatchNorm2dEvalModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn2d = torch.nn.BatchNorm2d(2)
        self.bn2d.eval()
        self.bn2d.running_mean = torch.tensor([0.5, 0.4])
        self.bn2d.running_var = torch.tensor([3.0, 2.0])
        self.bn2d.weight = torch.nn.Parameter(torch.tensor([3.0, 2.0]))
        self.bn2d.bias = torch.nn.Parameter(torch.tensor([0.5, 0.4]))

    @export
    @annotate_args([None, ([-1, 2, -1, -1], torch.float32, True)])
    def forward(self, x):
        return self.bn2d(x)


@register_test_case(module_factory=lambda: BatchNorm2dEvalModule())
def BatchNorm2dEvalModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 2, 4, 5))


class LayerNormModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ly = torch.nn.LayerNorm([2, 2, 3])
        self.ly.weight = torch.nn.Parameter(torch.rand(2, 2, 3))
        self.ly.bias = torch.nn.Parameter(torch.rand(2, 2, 3))

    @export
    @annotate_args([None, ([2, 5, 2, 2, 3], torch.float32, True)])
    def forward(self, x):
        return self.ly(x)


@register_test_case(module_factory=lambda: LayerNormModule())
def LayerNormModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 5, 2, 2, 3))
