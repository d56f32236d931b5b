"""Pooling: max/avg pool 2d (kernel, stride, padding, ceil_mode), adaptive pools, 1d pools."""

import torch
import torch.nn.functional as F

from e2e.framework import TestUtils, annotate_args, export, op_test, op_tests, register_test_case

op_tests(
    "Pool",
    inputs=lambda tu: [tu.randn(1, 3, 8, 8)],
    fns={
        "MaxPool2d_Kernel2": lambda x: F.max_pool2d(x, 2),
        "MaxPool2d_Kernel3Stride2Padding1": lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
        "MaxPool2d_CeilMode": lambda x: F.max_pool2d(x, 3, stride=2, ceil_mode=True),
        "MaxPool2d_Dilation2": lambda x: F.max_pool2d(x, 2, dilation=2),
        "MaxPool2d_WithIndices": lambda x: F.max_pool2d(x, 2, return_indices=True),
        "AvgPool2d_Kernel2": lambda x: F.avg_pool2d(x, 2),
        "AvgPool2d_Padding1": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1),
        "AvgPool2d_ExcludePad": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        "AvgPool2d_CeilMode": lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True),
        "AdaptiveAvgPool2d_1x1": lambda x: F.adaptive_avg_pool2d(x, 1),
        "AdaptiveAvgPool2d_2x2": lambda x: F.adaptive_avg_pool2d(x, (2, 2)),
        "AdaptiveAvgPool2d_3x3NonDivisible": lambda x: F.adaptive_avg_pool2d(x, 3),
        "AdaptiveMaxPool2d_2x2": lambda x: F.adaptive_max_pool2d(x, 2),
    },
)


op_tests(
    "PoolDynamic",
    inputs=lambda tu: [tu.randn(2, 3, 8, 8)],
    dynamic=[[-1, 3, -1, -1]],
    fns={
        "MaxPool2d": lambda x: F.max_pool2d(x, 2),
        "AvgPool2d": lambda x: F.avg_pool2d(x, 2),
        "GlobalAvgPool": lambda x: F.adaptive_avg_pool2d(x, 1),
    },
)


op_test("MaxPool1d_Kernel2", lambda x: F.max_pool1d(x, 2), lambda tu: [tu.randn(2, 3, 10)])
op_test("AvgPool1d_Kernel3Stride2", lambda x: F.avg_pool1d(x, 3, stride=2), lambda tu: [tu.randn(2, 3, 10)])
op_test("MaxPool2d_Float64", lambda x: F.max_pool2d(x, 2), lambda tu: [tu.randn(1, 2, 6, 6, dtype=torch.float64)])


class MaxPool2dModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mp2d = torch.nn.MaxPool2d(kernel_size=[6, 8], stride=[2, 2], padding=[3, 4], dilation=2)

    @export
    @annotate_args([None, ([-1, -1, -1, -1], torch.float32, True)])
    def forward(self, x):
        return self.mp2d(x)


@register_test_case(module_factory=lambda: MaxPool2dModule())
def MaxPool2dModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(1, 1, 20, 20, low=-1))
