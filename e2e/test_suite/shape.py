"""Shape manipulation: reshape/view, permute/transpose, squeeze/unsqueeze, flatten, expand, repeat."""

import torch

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case


@e2e_test(
    inputs=lambda tu: [tu.randn(2, 3, 4)],
    params={
        "Reshape2d": dict(fn=lambda x: x.reshape(6, 4)),
        "ReshapeInferred": dict(fn=lambda x: x.reshape(-1, 2)),
        "ViewFlat": dict(fn=lambda x: x.view(24)),
        "ViewSplitDim": dict(fn=lambda x: x.view(2, 3, 2, 2)),
        "Permute": dict(fn=lambda x: x.permute(2, 0, 1)),
        "Transpose01": dict(fn=lambda x: x.transpose(0, 1)),
        "TransposeNegative": dict(fn=lambda x: x.transpose(-1, -2)),
        "Unsqueeze0": dict(fn=lambda x: x.unsqueeze(0)),
        "UnsqueezeLast": dict(fn=lambda x: x.unsqueeze(-1)),
        "Flatten": dict(fn=torch.flatten),
        "FlattenStart1": dict(fn=lambda x: torch.flatten(x, 1)),
        "Unflatten": dict(fn=lambda x: x.unflatten(2, (2, 2))),
        "Expand": dict(fn=lambda x: x[:, :1, :].expand(2, 5, 4)),
        "Repeat": dict(fn=lambda x: x.repeat(1, 2, 1)),
        "Movedim": dict(fn=lambda x: torch.movedim(x, 0, -1)),
        "TransposeThenReshape": dict(fn=lambda x: x.transpose(1, 2).reshape(2, 12)),
        "Narrow": dict(fn=lambda x: x.narrow(2, 1, 2)),
    },
)
class Shape(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@e2e_test(
    inputs=lambda tu: [tu.randn(3, 1, 4, 1)],
    params={
        "SqueezeAll": dict(fn=torch.squeeze),
        "SqueezeDim": dict(fn=lambda x: x.squeeze(1)),
        "SqueezeDims": dict(fn=lambda x: x.squeeze((1, 3))),
        "SqueezeNonUnitDimIsNoop": dict(fn=lambda x: x.squeeze(0)),
    },
)
class Squeeze(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# Dynamic dims: the reshape target must be computed from the run-time sizes.
@e2e_test(
    inputs=lambda tu: [tu.randn(3, 4, 6)],
    dynamic=True,
    params={
        "ViewMergeLeading": dict(fn=lambda x: x.view(-1, x.shape[2])),
        "ReshapeSplitLast": dict(fn=lambda x: x.reshape(x.shape[0], x.shape[1], 2, -1)),
        "Permute": dict(fn=lambda x: x.permute(1, 2, 0)),
        "FlattenAll": dict(fn=torch.flatten),
        "Unsqueeze": dict(fn=lambda x: x.unsqueeze(1)),
        "ExpandNewDim": dict(fn=lambda x: x.unsqueeze(0).expand(2, -1, -1, -1)),
        "TransposeContiguous": dict(fn=lambda x: x.transpose(0, 2).contiguous()),
    },
)
class ShapeDynamic(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


op_test("ExpandAs", lambda x, y: x.expand_as(y), lambda tu: [tu.randn(3, 1), tu.randn(3, 4)])
op_test("BroadcastTo", lambda x: torch.broadcast_to(x, (2, 3, 4)), lambda tu: [tu.randn(4)])
op_test("ReshapeInt64", lambda x: x.reshape(4, 3), lambda tu: [tu.randint(3, 4)])
op_test("PermuteBool", lambda x: x.permute(1, 0), lambda tu: [tu.bools(3, 4)])
op_test("NumelAsScale", lambda x: x * x.numel(), lambda tu: [tu.randn(3, 4)], dynamic=True)
op_test("ViewAsRowsFromSize", lambda x, y: x.view(y.size(0), -1), lambda tu: [tu.randn(4, 6), tu.randn(2)], dynamic=True)


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
