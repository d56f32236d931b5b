"""Integer semantics: wrap-around overflow, division and remainder rounding, shifts, promotion."""

import torch

from e2e.framework import op_tests

INT_DTYPES = {
    "Int8": torch.int8,
    "Int16": torch.int16,
    "Int32": torch.int32,
    "Int64": torch.int64,
    "UInt8": torch.uint8,
}


def _near_limits(tu, dtype, *shape):
    """Values near both ends of the dtype's range, where arithmetic wraps."""
    info = torch.iinfo(dtype)
    offsets = torch.randint(0, 5, (2, *shape), generator=tu.generator, dtype=torch.int64)
    return torch.cat([info.min + offsets[0], info.max - offsets[1]]).to(dtype)


OVERFLOW = {
    "AddWraps": lambda x: x + x,
    "AddOneWraps": lambda x: x + 1,
    "SubWraps": lambda x: x - 7,
    "MulWraps": lambda x: x * 3,
    "NegWraps": lambda x: -x,
    "SumKeepsDtype": lambda x: torch.sum(x, 1, dtype=x.dtype),
    "CumsumKeepsDtype": lambda x: torch.cumsum(x, 1, dtype=x.dtype),
    "AbsOfMin": lambda x: torch.abs(x),
}
for name, dtype in INT_DTYPES.items():
    op_tests(f"Overflow{name}", OVERFLOW, inputs=lambda tu, d=dtype: [_near_limits(tu, d, 2, 3)])

# Signed dividends and divisors of both signs, never zero divisors.
DIVISION = {
    "FloorDivide": torch.floor_divide,
    "DivTrunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "DivFloor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "TrueDivide": torch.true_divide,
    "Remainder": torch.remainder,
    "Fmod": torch.fmod,
    "RemainderScalar": lambda x, y: torch.remainder(x, -3),
    "FmodScalar": lambda x, y: torch.fmod(x, -3),
    "FloorDivideScalar": lambda x, y: x // 4,
    "DivTruncScalar": lambda x, y: torch.div(x, -4, rounding_mode="trunc"),
}


def _signed_pair(tu, dtype):
    divisor = tu.randint(3, 5, low=1, high=6) * (tu.randint(3, 5, high=2) * 2 - 1)
    return [tu.randint(3, 5, low=-20, high=20).to(dtype), divisor.to(dtype)]


for name in ("Int8", "Int32", "Int64"):
    op_tests(f"Division{name}", DIVISION, inputs=lambda tu, d=INT_DTYPES[name]: _signed_pair(tu, d))
op_tests("DivisionFloat32", DIVISION, inputs=lambda tu: [t.float() * 1.5 for t in _signed_pair(tu, torch.int64)])
op_tests(
    "DivisionInt64Dynamic",
    {k: DIVISION[k] for k in ("FloorDivide", "DivTrunc", "Remainder", "Fmod")},
    inputs=lambda tu: _signed_pair(tu, torch.int64),
    dynamic=True,
)

BITS = {
    "ShiftLeft": lambda x, y: torch.bitwise_left_shift(x, y.abs() % 4),
    "ShiftRight": lambda x, y: torch.bitwise_right_shift(x, y.abs() % 4),
    "And": torch.bitwise_and,
    "Or": torch.bitwise_or,
    "Xor": torch.bitwise_xor,
    "Not": lambda x, y: torch.bitwise_not(x),
    "Gcd": lambda x, y: torch.gcd(x, y),
    "Lcm": lambda x, y: torch.lcm(x.abs() % 8, y.abs()),
}
for name in ("Int8", "Int32", "Int64"):
    op_tests(f"Bits{name}", BITS, inputs=lambda tu, d=INT_DTYPES[name]: _signed_pair(tu, d))

op_tests(
    "IntPromotion",
    inputs=lambda tu: [
        tu.randint(3, 4, low=-50, high=50, dtype=torch.int8),
        tu.randint(3, 4, low=-50, high=50, dtype=torch.int32),
    ],
    fns={
        "Int8PlusInt32": torch.add,
        "Int8TimesFloat": lambda x, y: x * 0.5,
        "Int8DivInt8IsFloat": lambda x, y: x / (y.to(torch.int8).abs() + 1).to(torch.int8),
        "Int32PlusBool": lambda x, y: y + (x > 0),
        "Int8PlusPythonInt": lambda x, y: x + 100,
        "Int32Pow": lambda x, y: torch.pow(y % 5, 3),
        "UInt8Sub": lambda x, y: x.to(torch.uint8) - y.to(torch.uint8),
        "Int32ToInt8Truncates": lambda x, y: (y * 7).to(torch.int8),
        "FloatToIntTruncatesTowardZero": lambda x, y: (y.float() / 3).to(torch.int32),
        "Int64MeanAsFloat": lambda x, y: y.to(torch.int64).float().mean(),
        "ClampInt": lambda x, y: torch.clamp(y, -10, 10),
        "SignInt": lambda x, y: torch.sign(x),
        "MaximumMixed": lambda x, y: torch.maximum(x, y),
    },
)
