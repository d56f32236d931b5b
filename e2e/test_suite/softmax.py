"""Softmax and log-softmax: dims, dtype argument, large inputs (stability), dynamic shapes."""

import torch
import torch.nn.functional as F

from e2e.framework import (
    FunctionModule,
    TestUtils,
    annotate_args,
    e2e_test,
    export,
    op_test,
    op_tests,
    register_test_case,
)

e2e_test(
    inputs=lambda tu, scale=1.0: [tu.randn(2, 3, 5) * scale],
    name="Softmax",
    params={
        "SoftmaxLastDim": dict(fn=lambda x: F.softmax(x, -1)),
        "SoftmaxDim0": dict(fn=lambda x: F.softmax(x, 0)),
        "SoftmaxDim1": dict(fn=lambda x: F.softmax(x, 1)),
        "LogSoftmaxLastDim": dict(fn=lambda x: F.log_softmax(x, -1)),
        "LogSoftmaxDim1": dict(fn=lambda x: F.log_softmax(x, 1)),
        "SoftmaxLargeInputs": dict(fn=lambda x: F.softmax(x, -1), scale=100.0),
        "LogSoftmaxLargeInputs": dict(fn=lambda x: F.log_softmax(x, -1), scale=100.0),
        "SoftminLastDim": dict(fn=lambda x: F.softmin(x, -1)),
        "SoftmaxDtypeFloat64": dict(fn=lambda x: F.softmax(x, -1, dtype=torch.float64)),
    },
)(FunctionModule)


op_tests(
    "SoftmaxDynamic",
    inputs=lambda tu: [tu.randn(3, 7)],
    dynamic=True,
    fns={
        "Softmax": lambda x: F.softmax(x, -1),
        "LogSoftmax": lambda x: F.log_softmax(x, -1),
        "SoftmaxDim0": lambda x: F.softmax(x, 0),
    },
)


op_test("SoftmaxFloat16", lambda x: F.softmax(x, -1), lambda tu: [tu.randn(3, 5, dtype=torch.float16)])
op_test("SoftmaxFloat64", lambda x: F.softmax(x, -1), lambda tu: [tu.randn(3, 5, dtype=torch.float64)])
op_test("LogSoftmaxBFloat16", lambda x: F.log_softmax(x, -1), lambda tu: [tu.randn(3, 5, dtype=torch.bfloat16)])
op_test(
    "SoftmaxWithMaskedMinusInf",
    lambda x, m: F.softmax(x.masked_fill(m, float("-inf")), -1),
    lambda tu: [tu.randn(3, 5), torch.tensor([[False, True, False, True, False]] * 3)],
)


class SoftmaxIntModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float32, True)])
    def forward(self, tensor):
        return torch.ops.aten.softmax.int(tensor, 2)


@register_test_case(module_factory=lambda: SoftmaxIntModule())
def SoftmaxIntModule_basic(module, tu: TestUtils):
    module.forward(tu.randn(3, 2, 4))


class LogSoftmaxIntModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float64, True)])
    def forward(self, tensor):
        return torch.ops.aten.log_softmax.int(tensor, 0)


@register_test_case(module_factory=lambda: LogSoftmaxIntModule())
def LogSoftmaxIntModule_basic(module, tu: TestUtils):
    module.forward(tu.randn(3, 4, dtype=torch.float64))
