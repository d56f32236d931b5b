"""Backward graphs: the aten backward ops autograd emits, and training-step style programs."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

aten = torch.ops.aten

op_tests(
    "BackwardOp",
    inputs=lambda tu: [tu.randn(3, 4), tu.randn(3, 4)],
    fns={
        "Threshold": lambda g, x: aten.threshold_backward(g, x, 0.0),
        "Tanh": lambda g, x: aten.tanh_backward(g, torch.tanh(x)),
        "Sigmoid": lambda g, x: aten.sigmoid_backward(g, torch.sigmoid(x)),
        "Gelu": lambda g, x: aten.gelu_backward(g, x),
        "GeluTanh": lambda g, x: aten.gelu_backward(g, x, approximate="tanh"),
        "Silu": lambda g, x: aten.silu_backward(g, x),
        "LeakyRelu": lambda g, x: aten.leaky_relu_backward(g, x, 0.1, False),
        "Elu": lambda g, x: aten.elu_backward(g, 1.0, 1.0, 1.0, False, x),
        "Hardtanh": lambda g, x: aten.hardtanh_backward(g, x, -0.5, 0.5),
        "Hardswish": lambda g, x: aten.hardswish_backward(g, x),
        "Hardsigmoid": lambda g, x: aten.hardsigmoid_backward(g, x),
        "Softplus": lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0),
        "Mish": lambda g, x: aten.mish_backward(g, x),
        "Softmax": lambda g, x: aten._softmax_backward_data(g, torch.softmax(x, 1), 1, torch.float32),
        "LogSoftmax": lambda g, x: aten._log_softmax_backward_data(g, torch.log_softmax(x, 1), 1, torch.float32),
        "MseLoss": lambda g, x: aten.mse_loss_backward(g.sum(), x, g, 1),
        "Rsub": lambda g, x: aten.rsub(g, x, alpha=2),
    },
)
op_tests(
    "BackwardOpNd",
    inputs=lambda tu: [tu.randn(1, 2, 4, 4), tu.randn(1, 2, 4, 4)],
    fns={
        "AvgPool2d": lambda g, x: aten.avg_pool2d_backward(
            g[:, :, :2, :2], x, [2, 2], [2, 2], [0, 0], False, True, None
        ),
        "MaxPool2dWithIndices": lambda g, x: aten.max_pool2d_with_indices_backward(
            g[:, :, :2, :2], x, [2, 2], [2, 2], [0, 0], [1, 1], False, F.max_pool2d(x, 2, return_indices=True)[1]
        ),
        "NativeLayerNorm": lambda g, x: aten.native_layer_norm_backward(
            g, x, [4], *aten.native_layer_norm(x, [4], None, None, 1e-5)[1:], None, None, [True, False, False]
        )[0],
        "Convolution": lambda g, x: aten.convolution_backward(
            g[:, :, 1:3, 1:3],
            x,
            torch.ones(2, 2, 3, 3),
            None,
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
            [True, True, False],
        )[:2],
        "UpsampleNearest": lambda g, x: aten.upsample_nearest2d_backward(g, [4, 4], [1, 2, 2, 2], None, None),
    },
)
op_tests(
    "BackwardEmbedding",
    inputs=lambda tu: [tu.randn(4, 3), tu.randint(4, high=6)],
    fns={
        "DenseBackward": lambda g, i: aten.embedding_dense_backward(g, i, 6, -1, False),
        "PaddingIdx": lambda g, i: aten.embedding_dense_backward(g, i, 6, 2, False),
    },
)


def _grad_of(loss):
    """The gradient of `loss(w, x)` w.r.t. w, computed inside the traced program."""
    return lambda w, x: torch.func.grad(loss)(w, x)


op_tests(
    "FuncGrad",
    inputs=lambda tu: [tu.randn(4, 3), tu.randn(2, 4)],
    fns={
        "LinearSum": _grad_of(lambda w, x: (x @ w).sum()),
        "LinearTanh": _grad_of(lambda w, x: torch.tanh(x @ w).sum()),
        "Mse": _grad_of(lambda w, x: ((x @ w) ** 2).mean()),
        "SoftmaxCrossEntropy": _grad_of(lambda w, x: F.cross_entropy(x @ w, torch.tensor([0, 2]))),
        "SgdStep": lambda w, x: w - 0.1 * torch.func.grad(lambda v: torch.relu(x @ v).sum())(w),
    },
)
