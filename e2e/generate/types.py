"""The values a generated program computes with: tensor types and input domains."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int64", "int32", "int8")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)

MAX_ELEMENTS = 2**16  # every tensor of a program, intermediates included

# The largest magnitude a float intermediate may reach: far enough below the type's
# overflow that a compiler computing in another order (or f16 in f32) stays finite.
FLOAT_LIMIT = {"float32": 1e6, "bfloat16": 1e6, "float16": 1e4}


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_int(dtype: str) -> bool:
    return dtype in INTS


@dataclass(frozen=True)
class TensorType:
    """A value's static type: its shape and dtype name (`float32`, `int8`, `bool`, ...)."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Domain:
    """Where an op's operand must lie: every element in [low, high], and at least `min_abs`
    away from zero (a divisor). None: unbounded on that side. `nan`: NaN elements may occur
    too (an op whose contract says what it does with a NaN: `ops.OpSpec.nan`); the bounds
    hold for the other elements."""

    low: float | None = None
    high: float | None = None
    min_abs: float = 0.0
    nan: bool = False

    def holds(self, value: torch.Tensor) -> bool:
        if value.dtype == torch.bool or value.numel() == 0:
            return True
        v = value.double()
        if has_nan(v):
            if not self.nan:
                return False
            v = v[~torch.isnan(v)]
        return bool(
            (self.low is None or (v >= self.low).all())
            and (self.high is None or (v <= self.high).all())
            and (self.min_abs == 0 or (v.abs() >= self.min_abs).all())
        )

    def meet(self, other: Domain) -> Domain:
        low = max((b for b in (self.low, other.low) if b is not None), default=None)
        high = min((b for b in (self.high, other.high) if b is not None), default=None)
        return Domain(low, high, max(self.min_abs, other.min_abs), self.nan and other.nan)

    def clamp_bounds(self) -> tuple[float | None, float | None]:
        """Bounds a `clamp` guard takes so that its result lies in this domain: a divisor
        domain (min_abs) is met from above (the guard makes it positive)."""
        low = self.low
        if self.min_abs:
            low = max(low if low is not None else self.min_abs, self.min_abs)
        return low, self.high

    def to_json(self) -> list:
        return [self.low, self.high, self.min_abs] + ([True] if self.nan else [])  # as before without NaN


def has_nan(value: torch.Tensor) -> bool:
    return value.is_floating_point() and bool(torch.isnan(value).any())


FREE = Domain()
NAN = Domain(nan=True)  # any value, NaN included
