"""Scans: cumsum, cumprod, cummax/cummin, logcumsumexp, over dims, dtypes and shapes."""

import torch

from e2e.framework import op_tests

SCANS = {
    "Cumsum": lambda x, d: torch.cumsum(x, d),
    "Cumprod": lambda x, d: torch.cumprod(x, d),
    "Cummax": lambda x, d: torch.cummax(x, d),
    "Cummin": lambda x, d: torch.cummin(x, d),
    "Logcumsumexp": lambda x, d: torch.logcumsumexp(x, d),
}

for dim in (0, 1, -1):
    suffix = f"DimNeg{-dim}" if dim < 0 else f"Dim{dim}"
    op_tests(
        f"Scan{suffix}",
        {k: (lambda x, f=f, d=dim: f(x, d)) for k, f in SCANS.items()},
        inputs=lambda tu: [tu.rand(3, 4, 5, low=0.5, high=1.5)],
    )
op_tests(
    "ScanDynamic",
    {k: (lambda x, f=f: f(x, 1)) for k, f in SCANS.items()},
    inputs=lambda tu: [tu.rand(3, 6, low=0.5, high=1.5)],
    dynamic=True,
)
op_tests("Scan1d", {k: (lambda x, f=f: f(x, 0)) for k, f in SCANS.items()}, inputs=lambda tu: [tu.randn(7)])
op_tests(
    "ScanTyped",
    inputs=lambda tu: [tu.randint(3, 5, low=-4, high=5)],
    fns={
        "CumsumInt64": lambda x: torch.cumsum(x, 1),
        "CumsumInt32": lambda x: torch.cumsum(x.int(), 1),
        "CumsumInt32DtypeInt64": lambda x: torch.cumsum(x.int(), 0, dtype=torch.int64),
        "CumsumBool": lambda x: torch.cumsum(x > 0, 1),
        "CumprodInt64": lambda x: torch.cumprod(x, 1),
        "CummaxInt64": lambda x: torch.cummax(x, 0),
        "CumsumToFloat64": lambda x: torch.cumsum(x, 1, dtype=torch.float64),
        "CumsumFloat16": lambda x: torch.cumsum(x.half() / 4, 1),
        "CumsumBFloat16": lambda x: torch.cumsum(x.bfloat16() / 4, 1),
    },
)
op_tests(
    "ScanUses",
    inputs=lambda tu: [tu.rand(2, 6)],
    fns={
        "Diff": lambda x: torch.diff(x, dim=1),
        "DiffPrepend": lambda x: torch.diff(x, dim=1, prepend=x[:, :1]),
        "CumsumReverse": lambda x: torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]),
        "ExclusiveCumsum": lambda x: torch.cumsum(x, 1) - x,
        "NormalizedCumsum": lambda x: torch.cumsum(x, 1) / x.sum(1, keepdim=True),
        "CumsumOfMask": lambda x: torch.cumsum((x > 0.5).long(), 1),
        "Trapezoid": lambda x: torch.trapezoid(x, dim=1),
        "CumulativeTrapezoid": lambda x: torch.cumulative_trapezoid(x, dim=1),
    },
)
