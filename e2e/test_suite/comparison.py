"""Comparisons: tensor-tensor, tensor-scalar, broadcasting, integer inputs, NaN tests."""

import torch

from e2e.framework import TestUtils, annotate_args, export, op_test, op_tests, register_test_case

COMPARISONS = {"Eq": torch.eq, "Ne": torch.ne, "Lt": torch.lt, "Le": torch.le, "Gt": torch.gt, "Ge": torch.ge}


# Integers from a small range so that equality actually happens.
op_tests(
    "CompareTensor",
    inputs=lambda tu: [tu.randint(3, 4, low=0, high=3).float(), tu.randint(3, 4, low=0, high=3).float()],
    dynamic=True,
    fns={f"{op}Float": fn for op, fn in COMPARISONS.items()},
)

op_tests(
    "CompareBroadcast",
    inputs=lambda tu: [tu.randint(3, 4, low=0, high=3), tu.randint(4, low=0, high=3)],
    fns={"EqInt64": torch.eq, "LtInt64": torch.lt, "GeInt64": torch.ge},
)


op_tests(
    "CompareScalar",
    inputs=lambda tu: [tu.randn(3, 4)],
    dynamic=True,
    fns={
        "GtZero": lambda x: x > 0.0,
        "LeHalf": lambda x: x <= 0.5,
        "NeZero": lambda x: x != 0.0,
    },
)


op_test("CompareScalar_EqInt32", lambda x: x == 2, lambda tu: [tu.randint(3, 4, low=0, high=4, dtype=torch.int32)])
op_test("IsNan", torch.isnan, lambda tu: [torch.cat([tu.randn(2, 4), tu.nans(1, 4)])])
op_test("IsInf", torch.isinf, lambda tu: [torch.cat([tu.randn(2, 4), torch.full((1, 4), float("inf"))])])
op_test("EqualsNanPropagation", lambda a, b: a == b, lambda tu: [tu.nans(2, 3), tu.nans(2, 3)])
op_test("CompareAndCombine", lambda x: (x > -0.5) & (x < 0.5), lambda tu: [tu.randn(3, 4)])
op_test("CompareToFloatMask", lambda x, y: (x > y).float() * x, lambda tu: [tu.randn(3, 4), tu.randn(3, 4)])
op_test("IsClose", lambda a, b: torch.isclose(a, b, rtol=0.0, atol=0.1), lambda tu: [tu.rand(3, 4), tu.rand(3, 4)])


class GreaterThanBroadcastModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True), ([-1], torch.float32, True)])
    def forward(self, a, b):
        return torch.gt(a, b)


@register_test_case(module_factory=lambda: GreaterThanBroadcastModule())
def GreaterThanBroadcastModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 5), tu.rand(5))
