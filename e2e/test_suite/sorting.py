"""Sorting and selection: sort, argsort, topk, kthvalue, msort, stable sorts, ties."""

import torch

from e2e.framework import op_tests

SORTS = {
    "SortLastDim": lambda x: torch.sort(x),
    "SortDim0": lambda x: torch.sort(x, 0),
    "SortDescending": lambda x: torch.sort(x, 1, descending=True),
    "SortValuesOnly": lambda x: torch.sort(x, -1).values,
    "Argsort": lambda x: torch.argsort(x, 1),
    "ArgsortDescending": lambda x: torch.argsort(x, 0, descending=True),
    "Msort": lambda x: torch.msort(x),
    "Topk2": lambda x: torch.topk(x, 2),
    "Topk1Dim0": lambda x: torch.topk(x, 1, 0),
    "TopkSmallest": lambda x: torch.topk(x, 3, largest=False),
    "TopkValuesOnly": lambda x: torch.topk(x, 2, 1).values,
    "Kthvalue": lambda x: torch.kthvalue(x, 2, 1),
    "KthvalueKeepdim": lambda x: torch.kthvalue(x, 1, 0, keepdim=True),
    "MedianDim": lambda x: torch.median(x, 1),
    "Median": lambda x: torch.median(x),
}

# Distinct values, so indices are well defined.
op_tests("Sorting", SORTS, inputs=lambda tu: [torch.randperm(20, generator=tu.generator).float().reshape(4, 5)])
op_tests(
    "SortingDynamic",
    {k: SORTS[k] for k in ("SortLastDim", "SortDescending", "Argsort", "Topk2", "Msort")},
    inputs=lambda tu: [torch.randperm(24, generator=tu.generator).float().reshape(4, 6)],
    dynamic=True,
)
op_tests(
    "SortingInt64",
    {k: SORTS[k] for k in ("SortLastDim", "SortDescending", "Argsort", "Topk2", "Kthvalue")},
    inputs=lambda tu: [torch.randperm(20, generator=tu.generator).reshape(4, 5) - 10],
)
op_tests(
    "SortingInt32",
    {k: SORTS[k] for k in ("SortLastDim", "Argsort", "Topk2")},
    inputs=lambda tu: [torch.randperm(20, generator=tu.generator).reshape(4, 5).int()],
)
op_tests(
    "Sorting1d",
    {k: SORTS[k] for k in ("SortLastDim", "TopkSmallest", "Topk2", "Median", "Msort")},
    inputs=lambda tu: [torch.randperm(9, generator=tu.generator).double()],
)
# Ties: only a stable sort has defined indices.
op_tests(
    "SortStableTies",
    inputs=lambda tu: [tu.randint(3, 8, high=3).float()],
    fns={
        "Ascending": lambda x: torch.sort(x, stable=True),
        "Descending": lambda x: torch.sort(x, stable=True, dim=1, descending=True),
        "Argsort": lambda x: torch.argsort(x, dim=1, stable=True),
        "ValuesOnly": lambda x: torch.sort(x, 0).values,
        "TopkValues": lambda x: torch.topk(x, 3).values,
        "Bool": lambda x: torch.sort(x > 0, stable=True),
    },
)
op_tests(
    "SortUses",
    inputs=lambda tu: [torch.randperm(12, generator=tu.generator).float().reshape(3, 4)],
    fns={
        "GatherBySortIndices": lambda x: torch.gather(x, 1, torch.argsort(x, 1)),
        "TopkThenSoftmax": lambda x: torch.softmax(torch.topk(x, 2).values, -1),
        "SearchsortedSorted": lambda x: torch.searchsorted(torch.sort(x, 1).values, x[:, :2].contiguous()),
        "Bucketize": lambda x: torch.bucketize(x, torch.tensor([2.0, 5.0, 9.0])),
        "UniqueSorted": lambda x: torch.unique(x.floor() // 3, sorted=True),
        "CountNonzeroAfterSort": lambda x: torch.count_nonzero(torch.sort(x).values > 5, 1),
    },
)
