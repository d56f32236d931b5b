"""Indexing: slicing, select, index_select, gather, scatter, advanced indexing, index_put."""

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
    "Slice",
    inputs=lambda tu: [tu.randn(4, 6, 5)],
    fns={
        "SliceRange": lambda x: x[1:3],
        "SliceStep2": lambda x: x[:, ::2],
        "SliceNegativeBounds": lambda x: x[:, -4:-1],
        "SliceLastDim": lambda x: x[..., 1:4],
        "SliceMultipleDims": lambda x: x[1:, 2:5, :3],
        "SelectInt": lambda x: x[2],
        "SelectNegative": lambda x: x[:, -1],
        "SelectThenSlice": lambda x: x[1, 2:, 0],
        "NoneIndexInsertsDim": lambda x: x[:, None, 1],
    },
)


op_tests(
    "SliceDynamic",
    inputs=lambda tu: [tu.randn(6, 5)],
    dynamic=True,
    fns={
        "SliceRange": lambda x: x[1:3],
        "SliceToEnd": lambda x: x[:, 2:],
        "SliceStep2": lambda x: x[::2],
        "Select": lambda x: x[:, 1],
        "SliceUsingSize": lambda x: x[: x.shape[0] // 2],
    },
)


# Tensor indices as inputs: int64 (and int32 where torch allows it).
e2e_test(
    inputs=lambda tu, index: [tu.randn(5, 6), index(tu)],
    name="IndexWithTensor",
    params={
        "IndexSelectDim0": dict(fn=lambda x, i: torch.index_select(x, 0, i), index=lambda tu: tu.randint(3, high=5)),
        "IndexSelectDim1Int32": dict(
            fn=lambda x, i: torch.index_select(x, 1, i), index=lambda tu: tu.randint(4, high=6, dtype=torch.int32)
        ),
        "GatherDim1": dict(fn=lambda x, i: torch.gather(x, 1, i), index=lambda tu: tu.randint(5, 3, high=6)),
        "GatherDim0": dict(fn=lambda x, i: torch.gather(x, 0, i), index=lambda tu: tu.randint(2, 6, high=5)),
        "TakeAlongDim": dict(fn=lambda x, i: torch.take_along_dim(x, i, 1), index=lambda tu: tu.randint(5, 2, high=6)),
        "AdvancedIndexRows": dict(fn=lambda x, i: x[i], index=lambda tu: tu.randint(4, high=5)),
        "AdvancedIndexColumns": dict(fn=lambda x, i: x[:, i], index=lambda tu: tu.randint(2, 3, high=6)),
        "AdvancedIndexNegative": dict(fn=lambda x, i: x[i], index=lambda tu: tu.randint(3, low=-5, high=0)),
    },
)(FunctionModule)


op_test(
    "AdvancedIndexTwoTensors",
    lambda x, i, j: x[i, j],
    lambda tu: [tu.randn(5, 6), tu.randint(4, high=5), tu.randint(4, high=6)],
)
op_test(
    "IndexSelectDynamic",
    lambda x, i: torch.index_select(x, 1, i),
    lambda tu: [tu.randn(4, 7), tu.randint(3, high=7)],
    dynamic=True,
)
op_test(
    "GatherDynamic",
    lambda x, i: torch.gather(x, 1, i),
    lambda tu: [tu.randn(4, 7), tu.randint(4, 3, high=7)],
    dynamic=True,
)
op_test("MaskedFill", lambda x, m: x.masked_fill(m, -1.0), lambda tu: [tu.randn(3, 4), tu.bools(3, 4)])
op_test("MaskedFillBroadcastMask", lambda x, m: x.masked_fill(m, 0.0), lambda tu: [tu.randn(3, 4), tu.bools(4)])
op_test(
    "ScatterSrcDim1",
    lambda x, i, s: torch.scatter(x, 1, i, s),
    # Distinct indices per row, so the result does not depend on write order.
    lambda tu: [tu.randn(3, 5), torch.tensor([[0, 2], [4, 1], [3, 0]]), tu.randn(3, 2)],
)
op_test(
    "ScatterAddDim0",
    lambda x, i, s: torch.scatter_add(x, 0, i, s),
    lambda tu: [tu.randn(3, 4), tu.randint(2, 4, high=3), tu.randn(2, 4)],
)
op_test(
    "IndexPutRows",
    lambda x, i, v: x.index_put((i,), v),
    lambda tu: [tu.randn(5, 3), torch.tensor([0, 3]), tu.randn(2, 3)],
)
op_test(
    "IndexPutAccumulate",
    lambda x, i, v: x.index_put((i,), v, accumulate=True),
    lambda tu: [tu.randn(5, 3), tu.randint(4, high=5), tu.randn(4, 3)],
)
op_test("SliceAssignClone", lambda x, v: _assign_slice(x, v), lambda tu: [tu.randn(4, 5), tu.randn(4, 2)])
op_test("IndexSelectInt64Source", lambda x, i: x[i], lambda tu: [tu.randint(5, 3, high=100), tu.randint(2, high=5)])


def _assign_slice(x, v):
    y = x.clone()
    y[:, 1:3] = v
    return y


class IndexSelectWholeTensorModule(torch.nn.Module):
    @export
    @annotate_args([None, ([3], torch.float32, True), ([3], torch.int64, True)])
    def forward(self, x, y):
        return torch.index_select(x, 0, y)


@register_test_case(module_factory=lambda: IndexSelectWholeTensorModule())
def IndexSelectWholeTensorModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3), torch.tensor([0, 1, 2]))


class GatherModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float32, True), ([-1, -1, -1], torch.int64, True)])
    def forward(self, tensor, indices):
        return torch.gather(tensor, 2, indices)


@register_test_case(module_factory=lambda: GatherModule())
def GatherModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 3, 4), torch.tensor([[[1, 2, 3], [1, 2, 3]]]))
