"""Tensor constructors: arange, full, zeros/ones, eye, linspace, *_like and new_*, tril/triu masks."""

import torch

from e2e.framework import TestUtils, annotate_args, export, op_test, op_tests, register_test_case

# Constructors whose result is combined with the input, so every test has an argument.
op_tests(
    "Construct",
    inputs=lambda tu: [tu.randn(3, 4)],
    fns={
        "Arange": lambda x: x + torch.arange(4),
        "ArangeStartEndStep": lambda x: x * torch.arange(1, 9, 2),
        "ArangeFloatStep": lambda x: x + torch.arange(0.0, 1.0, 0.25),
        "Full": lambda x: x + torch.full((3, 4), 2.5),
        "Zeros": lambda x: torch.zeros(3, 4) + x,
        "Ones": lambda x: x - torch.ones(1, 4),
        "Eye": lambda x: x[:, :3] @ torch.eye(3),
        "EyeRectangular": lambda x: x * torch.eye(3, 4),
        "Linspace": lambda x: x * torch.linspace(-1.0, 1.0, 4),
        "ZerosLike": lambda x: torch.zeros_like(x) + 1.0,
        "OnesLike": lambda x: torch.ones_like(x) * x,
        "FullLike": lambda x: torch.full_like(x, 7.0),
        "EmptyLikeFilled": lambda x: torch.empty_like(x).fill_(3.0),
        "NewZeros": lambda x: x.new_zeros(2, 3),
        "NewOnes": lambda x: x.new_ones(4),
        "Tril": torch.tril,
        "TriuDiagonal1": lambda x: torch.triu(x, 1),
    },
)


# Sizes taken from dynamic input dims.
op_tests(
    "ConstructDynamic",
    inputs=lambda tu: [tu.randn(3, 5)],
    dynamic=True,
    fns={
        "ArangeOfDim": lambda x: x + torch.arange(x.shape[1]),
        "ZerosOfShape": lambda x: torch.zeros(x.shape),
        "OnesLike": torch.ones_like,
        "FullLikeInt64": lambda x: torch.full_like(x, 3, dtype=torch.int64),
        "NewFullOfDim": lambda x: x.new_full((x.shape[0], 2), 0.5),
        "CausalMaskOfDim": lambda x: torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril(),
    },
)


op_test("ArangeInt64Output", lambda x: torch.arange(x.shape[0]) * 2, lambda tu: [tu.randn(5)])
op_test(
    "ArangeInt32Dtype",
    lambda x: torch.arange(2, 8, dtype=torch.int32) + x,
    lambda tu: [tu.randint(6, dtype=torch.int32)],
)
op_test("ZerosBool", lambda x: torch.zeros(3, 4, dtype=torch.bool) | x, lambda tu: [tu.bools(3, 4)])
op_test(
    "FullFloat64",
    lambda x: torch.full((2, 3), 0.1, dtype=torch.float64) + x,
    lambda tu: [tu.randn(2, 3, dtype=torch.float64)],
)
op_test("OnesLikeFloat16", torch.ones_like, lambda tu: [tu.randn(2, 3, dtype=torch.float16)])
op_test("ConstantOnly_NoInputs", lambda: torch.arange(6).reshape(2, 3), lambda tu: [])


class ArangeStartStepFloatModule(torch.nn.Module):
    @export
    @annotate_args([None])
    def forward(self):
        return torch.arange(-1, 3, 0.7)


@register_test_case(module_factory=lambda: ArangeStartStepFloatModule())
def ArangeStartStepFloatModule_basic(module, tu: TestUtils):
    module.forward()


class ZerosLikeIntModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.int64, True)])
    def forward(self, a):
        return torch.zeros_like(a)


@register_test_case(module_factory=lambda: ZerosLikeIntModule())
def ZerosLikeIntModule_basic(module, tu: TestUtils):
    module.forward(tu.randint(3, 4, high=10))
