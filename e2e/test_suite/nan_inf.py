"""NaN and infinity propagation: reductions, min/max families, activations, comparisons, casts."""

import math

import torch
import torch.nn.functional as F

from e2e.framework import op_tests


def _special(tu, *shape):
    """Random values with a NaN, +inf and -inf planted at fixed places."""
    x = tu.randn(*shape).flatten()
    x[1], x[4], x[7] = math.nan, math.inf, -math.inf
    return x.reshape(shape)


def _infs_only(tu, *shape):
    x = tu.randn(*shape).flatten()
    x[0], x[5] = math.inf, -math.inf
    return x.reshape(shape)


PROPAGATION = {
    "Add": lambda x: x + 1,
    "MulZero": lambda x: x * 0,
    "Exp": torch.exp,
    "Log": torch.log,
    "Sqrt": torch.sqrt,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Relu": torch.relu,
    "Gelu": F.gelu,
    "Abs": torch.abs,
    "Sign": torch.sign,
    "Floor": torch.floor,
    "Clamp": lambda x: torch.clamp(x, -1, 1),
    "ClampMinOnly": lambda x: torch.clamp(x, min=0),
    "Hardtanh": lambda x: F.hardtanh(x),
    "Reciprocal": torch.reciprocal,
    "Sum": lambda x: x.sum(1),
    "Mean": lambda x: x.mean(0),
    "Prod": lambda x: x.prod(1),
    "Amax": lambda x: x.amax(1),
    "Amin": lambda x: x.amin(0),
    "MaxDim": lambda x: x.max(1),
    "Argmax": lambda x: x.argmax(1),
    "Argmin": lambda x: x.argmin(0),
    "MaxAll": torch.max,
    "Softmax": lambda x: torch.softmax(x, 1),
    "Logsumexp": lambda x: torch.logsumexp(x, 1),
    "Cumsum": lambda x: torch.cumsum(x, 1),
    "Sort": lambda x: torch.sort(x, 1),
    "Topk": lambda x: torch.topk(x, 2, 1),
    "Isnan": torch.isnan,
    "Isinf": torch.isinf,
    "Isfinite": torch.isfinite,
    "Isposinf": torch.isposinf,
    "Isneginf": torch.isneginf,
    "EqSelf": lambda x: x == x,
    "NeSelf": lambda x: x != x,
    "Gt": lambda x: x > 0,
    "NanToNum": torch.nan_to_num,
    "NanToNumCustom": lambda x: torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
    "WhereNan": lambda x: torch.where(torch.isnan(x), torch.zeros_like(x), x),
    "Nansum": lambda x: torch.nansum(x, 1),
    "Nanmean": lambda x: torch.nanmean(x, 1),
    "ToFloat16": lambda x: x.half(),
    "ToBFloat16": lambda x: x.bfloat16(),
    "ToFloat64": lambda x: x.double(),
    "Matmul": lambda x: x @ torch.ones(4, 2),
}
op_tests("NanInf", PROPAGATION, inputs=lambda tu: [_special(tu, 3, 4)])
op_tests(
    "NanInfDynamic",
    {k: PROPAGATION[k] for k in ("Exp", "Sum", "Amax", "Softmax", "Isnan", "NanToNum")},
    inputs=lambda tu: [_special(tu, 3, 4)],
    dynamic=True,
)

PAIRWISE = {
    "Maximum": torch.maximum,
    "Minimum": torch.minimum,
    "Fmax": torch.fmax,
    "Fmin": torch.fmin,
    "Add": torch.add,
    "Div": torch.div,
    "Pow": torch.pow,
    "Atan2": torch.atan2,
    "Eq": torch.eq,
    "Lt": torch.lt,
    "Where": lambda x, y: torch.where(x > y, x, y),
    "Hypot": torch.hypot,
}
op_tests("NanInfPair", PAIRWISE, inputs=lambda tu: [_special(tu, 2, 5), _infs_only(tu, 2, 5)])
op_tests(
    "InfArithmetic",
    inputs=lambda tu: [_infs_only(tu, 2, 4)],
    fns={
        "InfMinusInf": lambda x: x - x,
        "InfTimesZero": lambda x: x * torch.zeros_like(x),
        "DivByZero": lambda x: torch.ones_like(x) / torch.zeros_like(x),
        "ZeroDivZero": lambda x: torch.zeros_like(x) / torch.zeros_like(x),
        "NegZeroDiv": lambda x: torch.ones_like(x) / -torch.zeros_like(x),
        "LogZero": lambda x: torch.log(torch.zeros_like(x)),
        "ExpOverflow": lambda x: torch.exp(torch.full_like(x, 100.0)),
        "Float16Overflow": lambda x: (torch.full_like(x, 300.0) * 300).half(),
        "SoftmaxAllNegInf": lambda x: torch.softmax(torch.full_like(x, -math.inf), 1),
        "MaskedFillNegInfSoftmax": lambda x: torch.softmax(
            torch.ones_like(x).masked_fill(torch.eye(2, 4).bool(), -math.inf), 1
        ),
    },
)
