"""Shape manipulation: reshape/view, permute/transpose, squeeze/unsqueeze, flatten, expand, repeat."""

import torch

from e2e.framework import TestUtils, annotate_args, export, op_test, op_tests, register_test_case

op_tests(
    "Shape",
    inputs=lambda tu: [tu.randn(2, 3, 4)],
    fns={
        "Reshape2d": lambda x: x.reshape(6, 4),
        "ReshapeInferred": lambda x: x.reshape(-1, 2),
        "ViewFlat": lambda x: x.view(24),
        "ViewSplitDim": lambda x: x.view(2, 3, 2, 2),
        "Permute": lambda x: x.permute(2, 0, 1),
        "Transpose01": lambda x: x.transpose(0, 1),
        "TransposeNegative": lambda x: x.transpose(-1, -2),
        "Unsqueeze0": lambda x: x.unsqueeze(0),
        "UnsqueezeLast": lambda x: x.unsqueeze(-1),
        "Flatten": torch.flatten,
        "FlattenStart1": lambda x: torch.flatten(x, 1),
        "Unflatten": lambda x: x.unflatten(2, (2, 2)),
        "Expand": lambda x: x[:, :1, :].expand(2, 5, 4),
        "Repeat": lambda x: x.repeat(1, 2, 1),
        "Movedim": lambda x: torch.movedim(x, 0, -1),
        "TransposeThenReshape": lambda x: x.transpose(1, 2).reshape(2, 12),
        "Narrow": lambda x: x.narrow(2, 1, 2),
    },
)


op_tests(
    "Squeeze",
    inputs=lambda tu: [tu.randn(3, 1, 4, 1)],
    fns={
        "SqueezeAll": torch.squeeze,
        "SqueezeDim": lambda x: x.squeeze(1),
        "SqueezeDims": lambda x: x.squeeze((1, 3)),
        "SqueezeNonUnitDimIsNoop": lambda x: x.squeeze(0),
    },
)


# Dynamic dims: the reshape target must be computed from the run-time sizes.
op_tests(
    "ShapeDynamic",
    inputs=lambda tu: [tu.randn(3, 4, 6)],
    dynamic=True,
    fns={
        "ViewMergeLeading": lambda x: x.view(-1, x.shape[2]),
        "ReshapeSplitLast": lambda x: x.reshape(x.shape[0], x.shape[1], 2, -1),
        "Permute": lambda x: x.permute(1, 2, 0),
        "FlattenAll": torch.flatten,
        "Unsqueeze": lambda x: x.unsqueeze(1),
        "ExpandNewDim": lambda x: x.unsqueeze(0).expand(2, -1, -1, -1),
        "TransposeContiguous": lambda x: x.transpose(0, 2).contiguous(),
    },
)


# Two dynamic dims merged into one next to a static one: every transformer's
# view(batch * seq, hidden) before a Linear. torch-mlir's aten.view lowering narrows seq
# to a static 1 there (llvm/torch-mlir#4743): the zoo's dynamic models on linalg, reduced.
op_test(
    "ViewMergeTwoDynamicDims",
    lambda x: x.view(x.shape[0] * x.shape[1], x.shape[2]),
    lambda tu: [tu.randn(3, 4, 6)],
    dynamic=[[-1, -1, 6]],
)


op_test("ExpandAs", lambda x, y: x.expand_as(y), lambda tu: [tu.randn(3, 1), tu.randn(3, 4)])
op_test("BroadcastTo", lambda x: torch.broadcast_to(x, (2, 3, 4)), lambda tu: [tu.randn(4)])
op_test("ReshapeInt64", lambda x: x.reshape(4, 3), lambda tu: [tu.randint(3, 4)])
op_test("PermuteBool", lambda x: x.permute(1, 0), lambda tu: [tu.bools(3, 4)])
op_test("NumelAsScale", lambda x: x * x.numel(), lambda tu: [tu.randn(3, 4)], dynamic=True)
op_test(
    "ViewAsRowsFromSize", lambda x, y: x.view(y.size(0), -1), lambda tu: [tu.randn(4, 6), tu.randn(2)], dynamic=True
)


class ViewExpandModule(torch.nn.Module):
    @export
    @annotate_args([None, ([6, 4], torch.float32, True)])
    def forward(self, a):
        return a.view(2, 3, 4)


@register_test_case(module_factory=lambda: ViewExpandModule())
def ViewExpandModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(6, 4))


class TransposeIntModule(torch.nn.Module):
    @export
    @annotate_args([None, ([3, 4, 2], torch.float32, True)])
    def forward(self, x):
        return torch.transpose(x, 0, 1)


@register_test_case(module_factory=lambda: TransposeIntModule())
def TransposeIntModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 4, 2))


class FlattenDynamicModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.flat = torch.nn.Flatten(2, 3)

    @export
    @annotate_args([None, ([-1, -1, -1, 9, 3, -1], torch.float32, True)])
    def forward(self, x):
        return self.flat(x)


@register_test_case(module_factory=lambda: FlattenDynamicModule())
def FlattenDynamicModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(10, 3, 8, 9, 3, 4))
