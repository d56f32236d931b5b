"""Reductions: sum/mean/prod/amax/amin, max/min with indices, arg*, var/std, norms, any/all."""

import torch

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case


@e2e_test(
    inputs=lambda tu: [tu.randn(3, 4, 5)],
    dynamic=True,
    params={
        "SumAll": dict(fn=torch.sum),
        "SumDim": dict(fn=lambda x: torch.sum(x, 1)),
        "SumDimKeepdim": dict(fn=lambda x: torch.sum(x, 1, keepdim=True)),
        "SumDims": dict(fn=lambda x: torch.sum(x, (0, 2))),
        "SumNegativeDim": dict(fn=lambda x: torch.sum(x, -1)),
        "MeanAll": dict(fn=torch.mean),
        "MeanDimKeepdim": dict(fn=lambda x: torch.mean(x, -1, keepdim=True)),
        "AmaxDim": dict(fn=lambda x: torch.amax(x, 2)),
        "AminDims": dict(fn=lambda x: torch.amin(x, (0, 1))),
        "ProdDim": dict(fn=lambda x: torch.prod(x, 1)),
        "MaxAll": dict(fn=torch.max),
        "MaxDim": dict(fn=lambda x: torch.max(x, 1)),
        "MinDimKeepdim": dict(fn=lambda x: torch.min(x, 0, keepdim=True)),
        "Argmax": dict(fn=lambda x: torch.argmax(x, 2)),
        "ArgminKeepdim": dict(fn=lambda x: torch.argmin(x, 1, keepdim=True)),
    },
)
class Reduce(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@e2e_test(
    inputs=lambda tu: [tu.randn(4, 6)],
    params={
        "VarDim": dict(fn=lambda x: torch.var(x, 1)),
        "VarUnbiasedFalse": dict(fn=lambda x: torch.var(x, 0, unbiased=False)),
        "StdAll": dict(fn=torch.std),
        "VarMeanDim": dict(fn=lambda x: torch.var_mean(x, 1, keepdim=True)),
        "VectorNormL2": dict(fn=lambda x: torch.linalg.vector_norm(x, 2, dim=1)),
        "VectorNormL1": dict(fn=lambda x: torch.linalg.vector_norm(x, 1, dim=0)),
        "NormFrobenius": dict(fn=lambda x: torch.norm(x)),
        "Logsumexp": dict(fn=lambda x: torch.logsumexp(x, 1)),
        "Cumsum": dict(fn=lambda x: torch.cumsum(x, 1)),
    },
)
class Statistic(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@e2e_test(
    inputs=lambda tu, make: [make(tu)],
    params={
        "SumInt64": dict(fn=lambda x: torch.sum(x, 1), make=lambda tu: tu.randint(3, 4, low=-5, high=5)),
        "SumInt32ToInt64": dict(fn=lambda x: torch.sum(x), make=lambda tu: tu.randint(3, 4, high=5, dtype=torch.int32)),
        "SumDtypeFloat64": dict(fn=lambda x: torch.sum(x, 0, dtype=torch.float64), make=lambda tu: tu.randn(3, 4)),
        "MeanFloat64": dict(fn=lambda x: torch.mean(x, 1), make=lambda tu: tu.randn(3, 4, dtype=torch.float64)),
        "AmaxInt64": dict(fn=lambda x: torch.amax(x, 0), make=lambda tu: tu.randint(3, 4, low=-50, high=50)),
        "SumFloat16": dict(fn=lambda x: torch.sum(x, 1), make=lambda tu: tu.rand(3, 4, dtype=torch.float16)),
        "AnyBool": dict(fn=lambda x: torch.any(x, 1), make=lambda tu: tu.bools(3, 4)),
        "AllBool": dict(fn=lambda x: torch.all(x, 0), make=lambda tu: tu.bools(3, 4)),
        "AnyAllBool": dict(fn=torch.any, make=lambda tu: tu.bools(3, 4)),
        "CountNonzero": dict(fn=lambda x: torch.count_nonzero(x, 1), make=lambda tu: tu.randint(3, 4, low=0, high=2)),
    },
)
class ReduceTyped(torch.nn.Module):
    def __init__(self, fn, make):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# Reducing dynamic dims down to nothing keeps the static ones.
op_test("ReduceSum_DynamicBatchKeepdim", lambda x: x.sum(0, keepdim=True), lambda tu: [tu.randn(5, 3)], dynamic=[[-1, 3]])


class ReduceSumDimIntListKeepDimModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float32, True)])
    def forward(self, a):
        return torch.sum(a, (1, 2), keepdim=True)


@register_test_case(module_factory=lambda: ReduceSumDimIntListKeepDimModule())
def ReduceSumDimIntListKeepDimModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 4, 5))


class ReduceMaxAlongDimModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float64, True)])
    def forward(self, a):
        return torch.max(a, 1)[0]


@register_test_case(module_factory=lambda: ReduceMaxAlongDimModule())
def ReduceMaxAlongDimModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 4, 5, dtype=torch.float64))
