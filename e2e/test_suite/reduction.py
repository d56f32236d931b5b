"""Reductions: sum/mean/prod/amax/amin, max/min with indices, arg*, var/std, norms, any/all."""

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

op_tests(
    "Reduce",
    inputs=lambda tu: [tu.randn(3, 4, 5)],
    dynamic=True,
    fns={
        "SumAll": torch.sum,
        "SumDim": lambda x: torch.sum(x, 1),
        "SumDimKeepdim": lambda x: torch.sum(x, 1, keepdim=True),
        "SumDims": lambda x: torch.sum(x, (0, 2)),
        "SumNegativeDim": lambda x: torch.sum(x, -1),
        "MeanAll": torch.mean,
        "MeanDimKeepdim": lambda x: torch.mean(x, -1, keepdim=True),
        "AmaxDim": lambda x: torch.amax(x, 2),
        "AminDims": lambda x: torch.amin(x, (0, 1)),
        "ProdDim": lambda x: torch.prod(x, 1),
        "MaxAll": torch.max,
        "MaxDim": lambda x: torch.max(x, 1),
        "MinDimKeepdim": lambda x: torch.min(x, 0, keepdim=True),
        "Argmax": lambda x: torch.argmax(x, 2),
        "ArgminKeepdim": lambda x: torch.argmin(x, 1, keepdim=True),
    },
)


op_tests(
    "Statistic",
    inputs=lambda tu: [tu.randn(4, 6)],
    fns={
        "VarDim": lambda x: torch.var(x, 1),
        "VarUnbiasedFalse": lambda x: torch.var(x, 0, unbiased=False),
        "StdAll": torch.std,
        "VarMeanDim": lambda x: torch.var_mean(x, 1, keepdim=True),
        "VectorNormL2": lambda x: torch.linalg.vector_norm(x, 2, dim=1),
        "VectorNormL1": lambda x: torch.linalg.vector_norm(x, 1, dim=0),
        "NormFrobenius": lambda x: torch.norm(x),
        "Logsumexp": lambda x: torch.logsumexp(x, 1),
        "Cumsum": lambda x: torch.cumsum(x, 1),
    },
)


e2e_test(
    inputs=lambda tu, make: [make(tu)],
    name="ReduceTyped",
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
)(FunctionModule)


# Reducing dynamic dims down to nothing keeps the static ones.
op_test(
    "ReduceSum_DynamicBatchKeepdim", lambda x: x.sum(0, keepdim=True), lambda tu: [tu.randn(5, 3)], dynamic=[[-1, 3]]
)


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
