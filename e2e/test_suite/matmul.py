"""Matrix products: mm, bmm, matmul broadcasting rules, linear, addmm, baddbmm, einsum."""

import torch
import torch.nn.functional as F

from e2e.framework import FunctionModule, TestUtils, annotate_args, e2e_test, export, op_test, register_test_case

e2e_test(
    inputs=lambda tu, lhs, rhs: [tu.randn(*lhs), tu.randn(*rhs)],
    name="MatmulOp",
    dynamic=True,
    params={
        "Mm": dict(fn=torch.mm, lhs=(3, 4), rhs=(4, 5)),
        "Bmm": dict(fn=torch.bmm, lhs=(2, 3, 4), rhs=(2, 4, 5)),
        "Matmul1dDot": dict(fn=torch.matmul, lhs=(4,), rhs=(4,)),
        "Matmul2d1dMv": dict(fn=torch.matmul, lhs=(3, 4), rhs=(4,)),
        "Matmul1d2d": dict(fn=torch.matmul, lhs=(4,), rhs=(4, 5)),
        "Matmul3d2d": dict(fn=torch.matmul, lhs=(2, 3, 4), rhs=(4, 5)),
        "Matmul2d3d": dict(fn=torch.matmul, lhs=(3, 4), rhs=(2, 4, 5)),
        "Matmul4dBroadcastBatch": dict(fn=torch.matmul, lhs=(2, 1, 3, 4), rhs=(1, 3, 4, 5)),
    },
)(FunctionModule)


@e2e_test(
    inputs=lambda tu, dtype: [tu.randint(3, 4, low=-4, high=4).to(dtype), tu.randint(4, 5, low=-4, high=4).to(dtype)],
    params={
        "Int64": dict(dtype=torch.int64),
        "Int32": dict(dtype=torch.int32),
        "Float64": dict(dtype=torch.float64),
        "Float16": dict(dtype=torch.float16),
        "BFloat16": dict(dtype=torch.bfloat16),
    },
)
class MmTyped(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()

    def forward(self, a, b):
        return torch.mm(a, b)


@e2e_test(
    inputs=lambda tu, shape: [tu.randn(*shape)],
    params={
        "WithBias": dict(bias=True, shape=(3, 8)),
        "NoBias": dict(bias=False, shape=(3, 8)),
        "Rank3Input": dict(bias=True, shape=(2, 3, 8)),
    },
)
class Linear(torch.nn.Module):
    def __init__(self, bias, shape):
        super().__init__()
        self.linear = torch.nn.Linear(8, 5, bias=bias)

    def forward(self, x):
        return self.linear(x)


@e2e_test(inputs=lambda tu: [tu.randn(6, 8)], dynamic=[[-1, 8]])
class LinearDynamicBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x)


# Only the leading (batch, row) dims dynamic; the contraction dim and rhs static.
op_test(
    "Matmul3d2d_DynamicLeadingDims",
    torch.matmul,
    lambda tu: [tu.randn(3, 4, 8), tu.randn(8, 5)],
    dynamic=[[-1, -1, 8], [8, 5]],
)
op_test(
    "Linear3d_DynamicLeadingDims",
    F.linear,
    lambda tu: [tu.randn(2, 5, 8), tu.randn(4, 8), tu.randn(4)],
    dynamic=[[-1, -1, 8], None, None],
)
op_test("FunctionalLinear", F.linear, lambda tu: [tu.randn(3, 4), tu.randn(5, 4), tu.randn(5)])
op_test(
    "Addmm",
    lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
    lambda tu: [tu.randn(3, 5), tu.randn(3, 4), tu.randn(4, 5)],
)
op_test("AddmmBroadcastBias", torch.addmm, lambda tu: [tu.randn(5), tu.randn(3, 4), tu.randn(4, 5)], dynamic=True)
op_test("Baddbmm", torch.baddbmm, lambda tu: [tu.randn(2, 3, 5), tu.randn(2, 3, 4), tu.randn(2, 4, 5)])
op_test(
    "EinsumBatchedMatmul",
    lambda a, b: torch.einsum("bij,bjk->bik", a, b),
    lambda tu: [tu.randn(2, 3, 4), tu.randn(2, 4, 5)],
)
op_test("EinsumOuter", lambda a, b: torch.einsum("i,j->ij", a, b), lambda tu: [tu.randn(3), tu.randn(4)])
op_test(
    "MatmulTransposedRhs",
    lambda a, b: a @ b.transpose(-1, -2),
    lambda tu: [tu.randn(2, 3, 4), tu.randn(2, 5, 4)],
    dynamic=True,
)


class MmModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True), ([-1, -1], torch.float32, True)])
    def forward(self, lhs, rhs):
        return torch.mm(lhs, rhs)


@register_test_case(module_factory=lambda: MmModule())
def MmModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(4, 4), tu.rand(4, 4))


@register_test_case(module_factory=lambda: MmModule())
def MmModule_chained(module, tu: TestUtils):
    res = module.forward(tu.rand(4, 4), tu.rand(4, 4))
    module.forward(res, res)


class BmmModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float32, True), ([-1, -1, -1], torch.float32, True)])
    def forward(self, lhs, rhs):
        return torch.bmm(lhs, rhs)


@register_test_case(module_factory=lambda: BmmModule())
def BmmModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 4, 5), tu.rand(3, 5, 4))
