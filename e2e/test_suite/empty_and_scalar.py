"""Edge shapes: 0-d tensors, empty tensors (a zero-size dim), size-1 dims, through common ops."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

SCALAR_OPS = {
    "Add": lambda x, y: x + y,
    "Mul": lambda x, y: x * y,
    "Div": lambda x, y: x / (y.abs() + 1),
    "Exp": lambda x, y: torch.exp(x),
    "Tanh": lambda x, y: torch.tanh(x),
    "Maximum": torch.maximum,
    "Where": lambda x, y: torch.where(x > y, x, y),
    "Gt": torch.gt,
    "Sum": lambda x, y: torch.sum(x),
    "Mean": lambda x, y: torch.mean(x),
    "Unsqueeze": lambda x, y: x.unsqueeze(0),
    "Reshape": lambda x, y: x.reshape(1, 1),
    "Expand": lambda x, y: x.expand(2, 3),
    "Stack": lambda x, y: torch.stack([x, y]),
    "Clamp": lambda x, y: x.clamp(-0.5, 0.5),
    "ToInt": lambda x, y: (x * 10).long(),
    "Item": lambda x, y: x * y.item(),
}
op_tests("Scalar0d", SCALAR_OPS, inputs=lambda tu: [tu.randn(), tu.randn()])
# Not here: softmax over a 0-d tensor hangs the FX configs' torch-backend lowering (a timeout
# costs CI 270 s per config); reproduce with op_test(..., lambda x: torch.softmax(x, 0), [tu.randn()]).
op_tests(
    "Scalar0dWithTensor",
    inputs=lambda tu: [tu.randn(), tu.randn(3, 4)],
    fns={
        "AddBroadcast": lambda s, x: x + s,
        "MulBroadcast": lambda s, x: s * x,
        "WhereScalarCond": lambda s, x: torch.where(s > 0, x, -x),
        "ScaleThenSum": lambda s, x: (x * s).sum(),
        "PowScalarExponent": lambda s, x: torch.pow(x.abs() + 1, s),
        "FullLike": lambda s, x: torch.full_like(x, 2.0) * s,
        "MatmulVectorVector": lambda s, x: x[0] @ x[1],
        "IndexWith0dTensor": lambda s, x: x[torch.tensor(1)],
        "Int0d": lambda s, x: x * torch.tensor(3),
        "Bool0d": lambda s, x: x.masked_fill(torch.tensor(True), 1.0),
    },
)

EMPTY_OPS = {
    "Add": lambda x: x + 1,
    "Exp": torch.exp,
    "SumAll": torch.sum,
    "SumDim": lambda x: x.sum(1),
    "MeanDimNonEmpty": lambda x: x.mean(0),
    "Amax": lambda x: x.amax(1),
    "Cat": lambda x: torch.cat([x, x], 0),
    "CatWithNonEmpty": lambda x: torch.cat([x, torch.ones(2, x.shape[1])], 0),
    "Reshape": lambda x: x.reshape(-1),
    "Transpose": lambda x: x.t(),
    "Matmul": lambda x: x @ torch.ones(x.shape[1], 2),
    "MatmulEmptyInner": lambda x: x.t() @ x,
    "Softmax": lambda x: torch.softmax(x, 1),
    "Cumsum": lambda x: torch.cumsum(x, 1),
    "Where": lambda x: torch.where(x > 0, x, 0.0),
    "Any": lambda x: torch.any(x > 0),
    "All": lambda x: torch.all(x > 0),
    "Prod": torch.prod,
    "Slice": lambda x: x[:, 1:],
    "Expand": lambda x: x.unsqueeze(0).expand(2, -1, -1),
}
op_tests("EmptyRows", EMPTY_OPS, inputs=lambda tu: [tu.randn(0, 3)])
op_tests(
    "EmptyRowsDynamic",
    {k: EMPTY_OPS[k] for k in ("Add", "SumDim", "Cat", "Matmul")},
    inputs=lambda tu: [tu.randn(0, 3)],
    dynamic=True,
)
op_tests(
    "EmptyResult",
    inputs=lambda tu: [tu.randn(3, 4)],
    fns={
        "SliceToNothing": lambda x: x[:, 2:2],
        "NarrowZero": lambda x: x.narrow(0, 1, 0),
        "IndexSelectEmptyIndex": lambda x: torch.index_select(x, 0, torch.zeros(0, dtype=torch.long)),
        "ZerosOfShape": lambda x: torch.zeros(0, x.shape[1]) + 1,
        "ArangeEmpty": lambda x: torch.arange(0) * 2,
        "SplitUneven": lambda x: torch.split(x, 4, 0),
        "EmptyCatOperand": lambda x: torch.cat([x, x[:0]], 0),
        "SumOfEmptyIsZero": lambda x: x[:0].sum(0),
        "ProdOfEmptyIsOne": lambda x: x[:, :0].prod(1),
        "SumEmptyKeepdim": lambda x: x[:0].sum(1, keepdim=True),
    },
)
op_tests(
    "SizeOne",
    inputs=lambda tu: [tu.randn(1, 4, 1), tu.randn(3, 1, 5)],
    fns={
        "BroadcastBoth": lambda x, y: x + y,
        "Squeeze": lambda x, y: x.squeeze(),
        "SqueezeDim": lambda x, y: y.squeeze(1),
        "SumOverOne": lambda x, y: x.sum(0),
        "SoftmaxOverOne": lambda x, y: torch.softmax(x, 2),
        "Bmm1": lambda x, y: torch.bmm(x.transpose(1, 2), x),
        "ExpandOne": lambda x, y: x.expand(3, 4, 5),
        "LayerNormOverOne": lambda x, y: F.layer_norm(x, [1]),
        "Conv1x1": lambda x, y: F.conv2d(y.unsqueeze(0), torch.ones(2, 3, 1, 1)),
        "MaxOverOne": lambda x, y: y.max(1),
    },
)
op_tests(
    "SizeOneDynamic",
    {"BroadcastBoth": lambda x, y: x + y, "MatmulOuter": lambda x, y: x[0] @ y[0]},
    inputs=lambda tu: [tu.randn(1, 4, 1), tu.randn(3, 1, 5)],
    dynamic=True,
)
