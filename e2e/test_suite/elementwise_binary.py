"""Elementwise binary and ternary ops, with broadcasting, scalars and integer dtypes."""

import torch

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

BINARY_OPS = {
    "Add": torch.add,
    "Sub": torch.sub,
    "Mul": torch.mul,
    "Div": torch.div,
    "Maximum": torch.maximum,
    "Minimum": torch.minimum,
    "Atan2": torch.atan2,
}


# Same shapes, every dim dynamic.
op_tests(
    "Binary",
    inputs=lambda tu: [tu.randn(3, 4), tu.rand(3, 4, low=0.5, high=2.0)],
    dynamic=True,
    fns={f"{op}SameShape": fn for op, fn in BINARY_OPS.items()},
)

# Broadcasting patterns, with the op fixed to add/mul.
e2e_test(
    inputs=lambda tu, lhs, rhs: [tu.randn(*lhs), tu.randn(*rhs)],
    name="BinaryBroadcast",
    params={
        "AddRowVector": dict(fn=torch.add, lhs=(3, 4), rhs=(4,)),
        "AddColumnOuter": dict(fn=torch.add, lhs=(3, 1), rhs=(1, 4)),
        "MulRank3ByRank2": dict(fn=torch.mul, lhs=(2, 3, 4), rhs=(3, 1)),
        "SubLeadingOnes": dict(fn=torch.sub, lhs=(1, 1, 4), rhs=(2, 3, 4)),
    },
)(FunctionModule)

# Broadcasting where the broadcast dims are dynamic (sizes only known at run time).
op_tests(
    "BinaryBroadcastDynamic",
    inputs=lambda tu: [tu.randn(2, 3, 4), tu.randn(3, 4)],
    dynamic=[[-1, -1, -1], [-1, -1]],
    fns={"Add": torch.add, "Mul": torch.mul},
)


e2e_test(
    inputs=lambda tu, dtype: [
        tu.randint(3, 4, low=-8, high=8, dtype=dtype),
        tu.randint(3, 4, low=1, high=5, dtype=dtype),
    ],
    name="BinaryInt",
    params={
        "AddInt64": dict(fn=torch.add, dtype=torch.int64),
        "MulInt32": dict(fn=torch.mul, dtype=torch.int32),
        "FloorDivideInt64": dict(fn=torch.floor_divide, dtype=torch.int64),
        "RemainderInt64": dict(fn=torch.remainder, dtype=torch.int64),
        "BitwiseAndInt32": dict(fn=torch.bitwise_and, dtype=torch.int32),
        "BitwiseXorInt64": dict(fn=torch.bitwise_xor, dtype=torch.int64),
        "TrueDivideInt64": dict(fn=torch.true_divide, dtype=torch.int64),
        "AddUInt8": dict(fn=torch.add, dtype=torch.uint8),
        "MulInt8": dict(fn=torch.mul, dtype=torch.int8),
    },
)(FunctionModule)


op_tests(
    "BinaryBool",
    inputs=lambda tu: [tu.bools(3, 4), tu.bools(3, 4)],
    fns={
        "LogicalAnd": torch.logical_and,
        "LogicalOr": torch.logical_or,
        "BitwiseOrBool": torch.bitwise_or,
        "LogicalXor": torch.logical_xor,
    },
)


# TestUtils cannot make 0-d tensors (`tu.randn()` raises), so squeeze a 1-element one.
op_test("MaximumZeroDimBroadcast", torch.maximum, lambda tu: [tu.randn(3, 4), tu.randn(1).squeeze(0)])
op_test("AddAlpha", lambda a, b: torch.add(a, b, alpha=2.5), lambda tu: [tu.randn(3, 4), tu.randn(3, 4)], dynamic=True)
op_test("SubScalar", lambda a: a - 1.5, lambda tu: [tu.randn(3, 4)], dynamic=True)
op_test("RsubScalar", lambda a: 2.0 - a, lambda tu: [tu.randn(3, 4)])
op_test("MulScalarInt64", lambda a: a * 3, lambda tu: [tu.randint(3, 4, low=-5, high=5)])
op_test("PowTensorScalar", lambda a: torch.pow(a, 3.0), lambda tu: [tu.randn(3, 4)])
op_test("PowTensorTensor", lambda a, b: torch.pow(a, b), lambda tu: [tu.rand(3, 4, low=0.5, high=2.0), tu.randn(3, 4)])
op_test(
    "DivRoundingFloor",
    lambda a, b: torch.div(a, b, rounding_mode="floor"),
    lambda tu: [tu.randn(3, 4) * 5, tu.rand(3, 4, low=0.5, high=2.0)],
)
op_test(
    "DivRoundingTrunc",
    lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    lambda tu: [tu.randn(3, 4) * 5, tu.rand(3, 4, low=0.5, high=2.0)],
)
op_test("FmodFloat", lambda a, b: torch.fmod(a, b), lambda tu: [tu.randn(3, 4) * 5, tu.rand(3, 4, low=0.5, high=2.0)])
op_test(
    "WhereSelect",
    lambda c, a, b: torch.where(c, a, b),
    lambda tu: [tu.bools(3, 4), tu.randn(3, 4), tu.randn(3, 4)],
    dynamic=True,
)
op_test("WhereBroadcastScalar", lambda c, a: torch.where(c, a, 0.0), lambda tu: [tu.bools(3, 1), tu.randn(3, 4)])
op_test(
    "Addcmul",
    lambda x, a, b: torch.addcmul(x, a, b, value=0.5),
    lambda tu: [tu.randn(3, 4), tu.randn(3, 4), tu.randn(4)],
)
op_test("Lerp", lambda a, b, w: torch.lerp(a, b, w), lambda tu: [tu.randn(3, 4), tu.randn(3, 4), tu.rand(3, 4)])


# --- upstream torch-mlir form ---------------------------------------------------------


class ElementwiseAddBroadcastModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True), ([-1], torch.float32, True)])
    def forward(self, a, b):
        return a + b


@register_test_case(module_factory=lambda: ElementwiseAddBroadcastModule())
def ElementwiseAddBroadcastModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 4), tu.rand(4))


class ElementwiseMulIntFloatModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.int64, True), ([-1, -1], torch.float32, True)])
    def forward(self, a, b):
        return torch.mul(a, b)


@register_test_case(module_factory=lambda: ElementwiseMulIntFloatModule())
def ElementwiseMulIntFloatModule_basic(module, tu: TestUtils):
    module.forward(tu.randint(3, 4, low=-10, high=10), tu.rand(3, 4))
