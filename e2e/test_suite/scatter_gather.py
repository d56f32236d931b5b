"""Scatter, gather and index_put families: dims, reductions, accumulation, index dtypes."""

import torch

from e2e.framework import FunctionModule, e2e_test, op_tests

# Indices are distinct along the scattered dim wherever the op overwrites, so the
# result does not depend on write order (which torch leaves unspecified).
DISTINCT_ROWS = torch.tensor([[0, 2], [4, 1], [3, 0]])
DISTINCT_COLS = torch.tensor([[0, 1, 2, 0], [2, 0, 1, 1]])

op_tests(
    "Gather",
    inputs=lambda tu: [tu.randn(4, 5, 3), tu.randint(4, 2, 3, high=5)],
    fns={
        "Dim1": lambda x, i: torch.gather(x, 1, i),
        "Dim1Neg": lambda x, i: torch.gather(x, -2, i),
        "TakeAlongDim1": lambda x, i: torch.take_along_dim(x, i, 1),
        "MethodForm": lambda x, i: x.gather(1, i),
        "ThenSum": lambda x, i: torch.gather(x, 1, i).sum(1),
    },
)
op_tests(
    "GatherDynamic",
    inputs=lambda tu: [tu.randn(5, 6), tu.randint(5, 3, high=6)],
    dynamic=True,
    fns={"Dim1": lambda x, i: torch.gather(x, 1, i), "Dim0": lambda x, i: torch.gather(x, 0, i.remainder(5))},
)
e2e_test(
    inputs=lambda tu, make: [make(tu), tu.randint(3, 2, high=4)],
    name="GatherTyped",
    params={
        name: dict(fn=lambda x, i: torch.gather(x, 1, i), make=make)
        for name, make in {
            "Int64": lambda tu: tu.randint(3, 4, high=100),
            "Int32": lambda tu: tu.randint(3, 4, high=100, dtype=torch.int32),
            "Bool": lambda tu: tu.bools(3, 4),
            "Float64": lambda tu: tu.randn(3, 4, dtype=torch.float64),
            "Float16": lambda tu: tu.randn(3, 4, dtype=torch.float16),
        }.items()
    },
)(FunctionModule)

op_tests(
    "Scatter",
    inputs=lambda tu: [tu.randn(3, 5), DISTINCT_ROWS, tu.randn(3, 2)],
    fns={
        "Src": lambda x, i, s: torch.scatter(x, 1, i, s),
        "Value": lambda x, i, s: torch.scatter(x, 1, i, 2.5),
        "Add": lambda x, i, s: torch.scatter_add(x, 1, i, s),
        "ReduceMultiply": lambda x, i, s: torch.scatter(x, 1, i, s, reduce="multiply"),
        "ReduceAddKeyword": lambda x, i, s: torch.scatter(x, 1, i, s, reduce="add"),
        "NegDim": lambda x, i, s: torch.scatter(x, -1, i, s),
    },
)
op_tests(
    "ScatterDim0",
    inputs=lambda tu: [tu.randn(3, 4), DISTINCT_COLS, tu.randn(2, 4)],
    fns={
        "Src": lambda x, i, s: torch.scatter(x, 0, i, s),
        "Add": lambda x, i, s: torch.scatter_add(x, 0, i, s),
        "SrcLargerThanIndex": lambda x, i, s: torch.scatter(x, 0, i[:, :3], s),
    },
)
# scatter_reduce: every reduction, with and without the self values; duplicates allowed.
op_tests(
    "ScatterReduce",
    inputs=lambda tu: [tu.randn(3, 4), tu.randint(3, 6, high=4), tu.randn(3, 6)],
    fns={
        f"{reduce.capitalize()}{'Include' if include else 'Exclude'}": (
            lambda x, i, s, r=reduce, inc=include: torch.scatter_reduce(x, 1, i, s, r, include_self=inc)
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for include in (True, False)
    },
)
op_tests(
    "ScatterReduceInt",
    inputs=lambda tu: [tu.randint(3, 4, low=-5, high=5), tu.randint(3, 6, high=4), tu.randint(3, 6, low=-5, high=5)],
    fns={r.capitalize(): (lambda x, i, s, r=r: torch.scatter_reduce(x, 1, i, s, r)) for r in ("sum", "amax", "amin")},
)
op_tests(
    "ScatterAddDynamic",
    inputs=lambda tu: [tu.randn(4, 5), tu.randint(6, 5, high=4), tu.randn(6, 5)],
    dynamic=True,
    fns={"Dim0": lambda x, i, s: torch.scatter_add(x, 0, i, s), "IndexAdd": lambda x, i, s: x.index_add(0, i[:, 0], s)},
)

op_tests(
    "IndexPut",
    inputs=lambda tu: [tu.randn(5, 3), torch.tensor([4, 0, 2]), tu.randn(3, 3)],
    fns={
        "Rows": lambda x, i, v: x.index_put((i,), v),
        "RowsAccumulate": lambda x, i, v: x.index_put((i,), v, accumulate=True),
        "BroadcastValue": lambda x, i, v: x.index_put((i,), v[0]),
        "ScalarTensorValue": lambda x, i, v: x.index_put((i,), v[0, 0]),
        "TwoIndices": lambda x, i, v: x.index_put((i, i.remainder(3)), v[:, 0]),
        "NegativeIndex": lambda x, i, v: x.index_put((i - 5,), v),
        "BoolMask": lambda x, i, v: x.index_put((x > 0,), torch.tensor(0.0)),
    },
)
op_tests(
    "IndexPutDuplicatesAccumulate",
    inputs=lambda tu: [tu.randn(4, 6), tu.randint(8, high=4), tu.randn(8, 6)],
    dynamic=True,
    fns={"Rows": lambda x, i, v: x.index_put((i,), v, accumulate=True)},
)
op_tests(
    "IndexOps",
    inputs=lambda tu: [tu.randn(5, 4), torch.tensor([3, 1]), tu.randn(2, 4)],
    fns={
        "IndexAdd": lambda x, i, s: x.index_add(0, i, s),
        "IndexAddAlpha": lambda x, i, s: x.index_add(0, i, s, alpha=-2.0),
        "IndexCopy": lambda x, i, s: x.index_copy(0, i, s),
        "IndexFill": lambda x, i, s: x.index_fill(0, i, -1.0),
        "IndexFillDim1": lambda x, i, s: x.index_fill(1, i, 7.0),
        "IndexReduceProd": lambda x, i, s: x.index_reduce(0, i, s, "prod"),
        "IndexReduceAmax": lambda x, i, s: x.index_reduce(0, i, s, "amax", include_self=False),
        "MaskedScatter": lambda x, i, s: x.masked_scatter(x > 0, torch.arange(20.0).reshape(5, 4)),
        "MaskedSelectSum": lambda x, i, s: torch.masked_select(x, x > 0).sum(),
        "Take": lambda x, i, s: torch.take(x, i * 3),
        "PutAccumulate": lambda x, i, s: x.put(i, s[0, :2], accumulate=True),
    },
)
