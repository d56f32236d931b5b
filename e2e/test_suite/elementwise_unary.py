"""Elementwise unary ops: math functions, activations, rounding, integer and bool ops."""

import torch
import torch.nn.functional as F

from e2e.framework import FunctionModule, TestUtils, annotate_args, e2e_test, export, op_tests, register_test_case

# `fn` goes to FunctionModule; `low`/`high` only set the input range.
e2e_test(
    inputs=lambda tu, low=-2.0, high=2.0: [tu.rand(3, 4, low=low, high=high)],
    name="ElementwiseUnary",
    dynamic=True,
    params={
        "Sin": dict(fn=torch.sin),
        "Cos": dict(fn=torch.cos),
        "Tanh": dict(fn=torch.tanh),
        "Exp": dict(fn=torch.exp),
        "Log": dict(fn=torch.log, low=0.1, high=4.0),
        "Sqrt": dict(fn=torch.sqrt, low=0.0, high=4.0),
        "Rsqrt": dict(fn=torch.rsqrt, low=0.1, high=4.0),
        "Abs": dict(fn=torch.abs),
        "Neg": dict(fn=torch.neg),
        "Reciprocal": dict(fn=torch.reciprocal, low=0.5, high=3.0),
        "Erf": dict(fn=torch.erf),
        "Log1p": dict(fn=torch.log1p, low=-0.5, high=2.0),
        "Expm1": dict(fn=torch.expm1),
        "Sign": dict(fn=torch.sign),
        "Floor": dict(fn=torch.floor, low=-5.0, high=5.0),
        "Ceil": dict(fn=torch.ceil, low=-5.0, high=5.0),
        "Round": dict(fn=torch.round, low=-5.0, high=5.0),
        "Trunc": dict(fn=torch.trunc, low=-5.0, high=5.0),
        "Square": dict(fn=torch.square),
        "Atan": dict(fn=torch.atan),
        "Asin": dict(fn=torch.asin, low=-0.9, high=0.9),
    },
)(FunctionModule)


op_tests(
    "Activation",
    inputs=lambda tu: [tu.randn(2, 3, 4)],
    fns={
        "Relu": torch.relu,
        "Sigmoid": torch.sigmoid,
        "Silu": F.silu,
        "GeluTanh": lambda x: F.gelu(x, approximate="tanh"),
        "LeakyRelu": lambda x: F.leaky_relu(x, 0.1),
        "Elu": F.elu,
        "Softplus": F.softplus,
        "Hardtanh": lambda x: F.hardtanh(x, -0.5, 0.5),
        "Hardswish": F.hardswish,
        "Mish": F.mish,
    },
)


@e2e_test(
    inputs=lambda tu: [tu.randn(4, 5)],
    dynamic=True,
    params={
        "MinMax": dict(min=-0.5, max=0.5),
        "MinOnly": dict(min=0.0, max=None),
        "MaxOnly": dict(min=None, max=0.25),
    },
)
class Clamp(torch.nn.Module):
    def __init__(self, min, max):
        super().__init__()
        self.min, self.max = min, max

    def forward(self, x):
        return torch.clamp(x, self.min, self.max)


# Integer, bool and reduced/extended-precision float inputs.
e2e_test(
    inputs=lambda tu, make: [make(tu)],
    name="UnaryTyped",
    params={
        "AbsInt64": dict(fn=torch.abs, make=lambda tu: tu.randint(3, 4, low=-10, high=10)),
        "NegInt32": dict(fn=torch.neg, make=lambda tu: tu.randint(3, 4, low=-10, high=10, dtype=torch.int32)),
        "BitwiseNotInt64": dict(fn=torch.bitwise_not, make=lambda tu: tu.randint(3, 4, low=-10, high=10)),
        "BitwiseNotBool": dict(fn=torch.bitwise_not, make=lambda tu: tu.bools(3, 4)),
        "LogicalNotBool": dict(fn=torch.logical_not, make=lambda tu: tu.bools(3, 4)),
        "ExpFloat64": dict(fn=torch.exp, make=lambda tu: tu.randn(3, 4, dtype=torch.float64)),
        "TanhFloat16": dict(fn=torch.tanh, make=lambda tu: tu.randn(3, 4, dtype=torch.float16)),
        "SigmoidBFloat16": dict(fn=torch.sigmoid, make=lambda tu: tu.randn(3, 4, dtype=torch.bfloat16)),
        "ReluInt64": dict(fn=torch.relu, make=lambda tu: tu.randint(3, 4, low=-10, high=10)),
    },
)(FunctionModule)


@e2e_test(inputs=lambda tu: [torch.cat([tu.randn(2, 4), tu.nans(1, 4)])])
class NanToNum(torch.nn.Module):
    def forward(self, x):
        return torch.nan_to_num(x, nan=0.5)


# --- upstream torch-mlir form ---------------------------------------------------------


class ElementwiseGeluModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True)])
    def forward(self, x):
        return F.gelu(x)


@register_test_case(module_factory=lambda: ElementwiseGeluModule())
def ElementwiseGeluModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(5, 3, low=-0.5, high=0.5))


class ElementwiseSigmoidIntModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.int32, True)])
    def forward(self, x):
        return torch.sigmoid(x)


@register_test_case(module_factory=lambda: ElementwiseSigmoidIntModule())
def ElementwiseSigmoidIntModule_basic(module, tu: TestUtils):
    module.forward(tu.randint(3, 5, low=1, high=10, dtype=torch.int32))
