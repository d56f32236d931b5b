"""Convolutions: conv2d strides/padding/dilation/groups, conv1d, transposed conv2d."""

import torch
import torch.nn.functional as F

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case


@e2e_test(
    inputs=lambda tu: [tu.randn(1, 4, 8, 8)],
    params={
        "Basic": dict(),
        "Stride2": dict(stride=2),
        "Stride2Padding1": dict(stride=2, padding=1),
        "PaddingSame": dict(padding="same"),
        "Dilation2": dict(dilation=2),
        "Groups2": dict(groups=2),
        "Depthwise": dict(out_channels=4, groups=4),
        "NoBias": dict(bias=False),
        "Kernel1x1": dict(kernel_size=1),
        "RectangularKernel": dict(kernel_size=(1, 3), padding=(0, 1)),
        "PaddingReflect": dict(padding=1, padding_mode="reflect"),
    },
)
class Conv2d(torch.nn.Module):
    def __init__(self, out_channels=6, kernel_size=3, **kwargs):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, out_channels, kernel_size, **kwargs)

    def forward(self, x):
        return self.conv(x)


@e2e_test(inputs=lambda tu: [tu.randn(2, 3, 8, 8)], dynamic=[[-1, 3, -1, -1]])
class Conv2dDynamicBatchAndSpatial(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


@e2e_test(inputs=lambda tu: [tu.randn(1, 3, 6, 6, dtype=torch.float64)])
class Conv2dFloat64(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3).double()

    def forward(self, x):
        return self.conv(x)


@e2e_test(
    inputs=lambda tu: [tu.randn(1, 4, 5, 5)],
    params={
        "Basic": dict(),
        "Stride2Padding1": dict(stride=2, padding=1),
        "OutputPadding": dict(stride=2, output_padding=1),
    },
)
class ConvTranspose2d(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(4, 3, 3, **kwargs)

    def forward(self, x):
        return self.conv(x)


op_test(
    "Conv1d_Padding1",
    lambda x, w, b: F.conv1d(x, w, b, padding=1),
    lambda tu: [tu.randn(2, 3, 10), tu.randn(4, 3, 3), tu.randn(4)],
)
op_test(
    "Conv2dFunctional_WeightInput",
    lambda x, w: F.conv2d(x, w, stride=1),
    lambda tu: [tu.randn(1, 2, 6, 6), tu.randn(3, 2, 3, 3)],
)


class Conv2dNoPaddingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(2, 10, 3, bias=False)
        self.train(False)

    @export
    @annotate_args([None, ([-1, -1, -1, -1], torch.float32, True)])
    def forward(self, x):
        return self.conv(x)


@register_test_case(module_factory=lambda: Conv2dNoPaddingModule())
def Conv2dNoPaddingModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(5, 2, 10, 20))
