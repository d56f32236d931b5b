"""Inputs at the boundaries: ties, signed zeros, values at and next to thresholds,
rounding halfway cases, integer extremes, NaN where the test says so.

Uniform random inputs almost never tie or land on a threshold, so a strict `>` compiled
as `>=`, a max pool that keeps the last of equal values, or `round` for `roundeven`
passes them. These families draw from `tu.boundary` (see `boundary_values`), which makes
such inputs the common case. Measured with `python -m e2e.mutation` (README).
"""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

FLOATS = {"F32": torch.float32, "F64": torch.float64}
INTS = {"Int8": torch.int8, "Int32": torch.int32, "Int64": torch.int64, "UInt8": torch.uint8}

# Two tensors from one small pool: most elements tie with their partner.
COMPARE = {"Gt": torch.gt, "Ge": torch.ge, "Lt": torch.lt, "Le": torch.le, "Eq": torch.eq, "Ne": torch.ne}
for dname, dtype in FLOATS.items():
    op_tests(
        f"Boundary_Compare{dname}",
        COMPARE,
        dynamic=True,
        inputs=lambda tu, d=dtype: [tu.boundary(6, 8, dtype=d), tu.boundary(6, 8, dtype=d)],
    )
for dname, dtype in INTS.items():
    op_tests(
        f"Boundary_Compare{dname}",
        {k: COMPARE[k] for k in ("Gt", "Ge", "Lt", "Le")},
        inputs=lambda tu, d=dtype: [tu.boundary(6, 8, dtype=d), tu.boundary(6, 8, dtype=d)],
    )

op_tests(
    "Boundary_CompareScalar",
    inputs=lambda tu: [tu.boundary(4, 6, thresholds=(0.5, 2.0))],
    fns={
        "GtHalf": lambda x: x > 0.5,
        "GeHalf": lambda x: x >= 0.5,
        "LtTwo": lambda x: x < 2.0,
        "LeTwo": lambda x: x <= 2.0,
        "GtZero": lambda x: x > 0,
        "SelectGtZero": lambda x: torch.where(x > 0, x, -x),
    },
)
op_tests(
    "Boundary_CompareNan",
    {"Gt": torch.gt, "Lt": torch.lt, "Ne": torch.ne, "Eq": torch.eq},
    inputs=lambda tu: [tu.boundary(4, 6, nan=True, inf=True), tu.boundary(4, 6, nan=True, inf=True)],
)

# min/max: ties pick the first index; NaN propagates through maximum/amax, not through fmax.
MINMAX = {
    "Maximum": torch.maximum,
    "Minimum": torch.minimum,
    "Fmax": torch.fmax,
    "Fmin": torch.fmin,
}
op_tests(
    "Boundary_MinMaxNan",
    MINMAX,
    inputs=lambda tu: [tu.boundary(4, 6, nan=True, inf=True), tu.boundary(4, 6, nan=True, inf=True)],
)
REDUCE = {
    "Argmax": lambda x: torch.argmax(x, 1),
    "Argmin": lambda x: torch.argmin(x, 1),
    "MaxDim": lambda x: torch.max(x, 1),
    "MinDim": lambda x: torch.min(x, 0),
    "Amax": lambda x: torch.amax(x, 1),
    "Amin": lambda x: torch.amin(x, 0),
    "MaxAll": lambda x: torch.max(x),
    "MinAll": lambda x: torch.min(x),
}
op_tests("Boundary_ReduceTies", REDUCE, inputs=lambda tu: [tu.boundary(5, 7)], dynamic=True)
op_tests("Boundary_ReduceNegative", REDUCE, inputs=lambda tu: [-tu.rand(3, 5) - 1])
op_tests(
    "Boundary_ReduceNan",
    {k: REDUCE[k] for k in ("Amax", "Amin", "MaxAll", "MinAll", "MaxDim")},
    inputs=lambda tu: [tu.boundary(5, 7, nan=True, inf=True)],
)
for dname, dtype in INTS.items():
    op_tests(
        f"Boundary_Reduce{dname}",
        {k: REDUCE[k] for k in ("Argmax", "Argmin", "Amax", "Amin")},
        inputs=lambda tu, d=dtype: [tu.boundary(5, 7, dtype=d)],
    )
    op_tests(
        f"Boundary_MinMax{dname}",
        {"Maximum": torch.maximum, "Minimum": torch.minimum},
        inputs=lambda tu, d=dtype: [tu.boundary(6, 8, dtype=d), tu.boundary(6, 8, dtype=d)],
    )

# Pooling windows full of equal values: the index of the first maximum.
op_tests(
    "Boundary_PoolTies",
    inputs=lambda tu: [tu.boundary(1, 2, 6, 6)],
    fns={
        "MaxPool2dIndices": lambda x: F.max_pool2d(x, 2, return_indices=True),
        "MaxPool2dPaddedIndices": lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True),
        "MaxPool2dNegative": lambda x: F.max_pool2d(-x.abs() - 1, 3, stride=2, padding=1),
        "AdaptiveMaxPool2dIndices": lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True),
        "MaxPool1dIndices": lambda x: F.max_pool1d(x[0], 2, return_indices=True),
    },
)

# Repeated keys: a stable sort has one right answer.
op_tests(
    "Boundary_SortKeys",
    inputs=lambda tu: [tu.boundary(4, 9)],
    fns={
        "Stable": lambda x: torch.sort(x, dim=1, stable=True),
        "StableDescending": lambda x: torch.sort(x, dim=1, stable=True, descending=True),
        "ArgsortStable": lambda x: torch.argsort(x, dim=0, stable=True),
        "TopkValues": lambda x: torch.topk(x, 3, 1).values,
        "TopkSmallestValues": lambda x: torch.topk(x, 3, 1, largest=False).values,
    },
)
op_tests(
    "Boundary_SortKeysInt32",
    {"Stable": lambda x: torch.sort(x, dim=1, stable=True)},
    inputs=lambda tu: [tu.boundary(4, 9, dtype=torch.int32)],
)

# Clamp and threshold bounds: the bounds and their neighbours are in the inputs.
op_tests(
    "Boundary_Clamp",
    inputs=lambda tu: [tu.boundary(4, 8, thresholds=(-0.5, 0.5, 3.0, -3.0, 6.0))],
    fns={
        "Clamp": lambda x: torch.clamp(x, -0.5, 0.5),
        "ClampMin": lambda x: torch.clamp(x, min=0.5),
        "Threshold": lambda x: F.threshold(x, 0.5, -1.0),
        "Relu": F.relu,
        "Relu6": F.relu6,
        "Hardtanh": lambda x: F.hardtanh(x, -0.5, 0.5),
        "Hardsigmoid": F.hardsigmoid,
        "Hardswish": F.hardswish,
        "LeakyRelu": lambda x: F.leaky_relu(x, 0.1),
        "Hardshrink": lambda x: F.hardshrink(x, 0.5),
        "Softshrink": lambda x: F.softshrink(x, 0.5),
        "Sign": torch.sign,
        "Heaviside": lambda x: torch.heaviside(x, torch.tensor(0.5)),
    },
)
op_tests(
    "Boundary_ClampInt",
    {"Clamp": lambda x: torch.clamp(x, -2, 2), "ClampMin": lambda x: torch.clamp(x, min=1)},
    inputs=lambda tu: [tu.boundary(4, 8, dtype=torch.int32, thresholds=(2, -2))],
)

# Integer arithmetic at the extremes, signed division and shifts.
for dname, dtype in INTS.items():
    op_tests(
        f"Boundary_IntArith{dname}",
        {
            "Sub": torch.sub,
            "Add": torch.add,
            "Mul": torch.mul,
            "FloorDivide": lambda a, b: torch.floor_divide(a, torch.where(b == 0, 1, b)),
            "Remainder": lambda a, b: torch.remainder(a, torch.where(b == 0, 1, b)),
        },
        inputs=lambda tu, d=dtype: [tu.boundary(6, 8, dtype=d), tu.boundary(6, 8, dtype=d)],
    )
op_tests(
    "Boundary_IntShift",
    {
        "Right": lambda a: a >> 1,
        "Left": lambda a: a << 1,
        "TruncDiv": lambda a: torch.div(a, 3, rounding_mode="trunc"),
        "FloorDiv": lambda a: torch.div(a, 3, rounding_mode="floor"),
    },
    inputs=lambda tu: [tu.boundary(4, 6, dtype=torch.int32)],
)

# Rounding at halfway cases (round half to even), signed zeros.
ROUND = {
    "Round": torch.round,
    "Floor": torch.floor,
    "Ceil": torch.ceil,
    "Trunc": torch.trunc,
    "RoundDecimals1": lambda x: torch.round(x, decimals=1),
    "Frac": torch.frac,
    "ReciprocalOfZero": lambda x: torch.reciprocal(x),
}
for dname, dtype in FLOATS.items():
    op_tests(f"Boundary_Rounding{dname}", ROUND, inputs=lambda tu, d=dtype: [tu.boundary(4, 8, dtype=d)])

# Casts: sign extension, negative floats to integers, bools and unsigned.
op_tests(
    "Boundary_Cast",
    inputs=lambda tu: [tu.boundary(4, 8, dtype=torch.int8)],
    fns={
        "Int8ToInt32": lambda x: x.to(torch.int32),
        "Int8ToInt64": lambda x: x.to(torch.int64),
        "Int8ToFloat": lambda x: x.to(torch.float32),
        "Int8ToUInt8": lambda x: x.to(torch.uint8),
        "Int8ToBool": lambda x: x.to(torch.bool),
    },
)
op_tests(
    "Boundary_CastUnsigned",
    inputs=lambda tu: [tu.boundary(4, 8, dtype=torch.uint8)],
    fns={
        "UInt8ToInt32": lambda x: x.to(torch.int32),
        "UInt8ToFloat": lambda x: x.to(torch.float32),
        "UInt8ToInt8": lambda x: x.to(torch.int8),
    },
)
op_tests(
    "Boundary_CastFloat",
    inputs=lambda tu: [tu.boundary(4, 8, thresholds=(-127.5, 126.5))],
    fns={
        "ToInt32": lambda x: x.to(torch.int32),
        "ToInt64": lambda x: x.to(torch.int64),
        "ToInt8": lambda x: x.to(torch.int8),
        "ToBool": lambda x: x.to(torch.bool),
        "ToFloat16": lambda x: x.to(torch.float16),
        "ToBFloat16": lambda x: x.to(torch.bfloat16),
    },
)
