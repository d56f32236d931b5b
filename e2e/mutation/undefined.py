"""Where a program's ops are undefined, and a program that shows when its result depends on that.

MLIR's arith ops (and the LLVM instructions they lower to) are undefined on some inputs:

| ops | undefined when |
|---|---|
| `fptosi`, `fptoui` | the value truncated towards zero does not fit the integer type (NaN, inf included): poison |
| `shli`, `shrsi`, `shrui` | the shift amount, as unsigned, is the bit width or more: poison |
| `divsi`, `remsi`, `ceildivsi`, `floordivsi` | the divisor is 0, or the division is `INT_MIN / -1`: undefined behaviour (x86 traps) |
| `divui`, `remui`, `ceildivui` | the divisor is 0 |

There, the value a program computes is whatever instruction LLVM picked for the CPU
(`fptoui` of -3.0: -3 on an AVX2 CPU, -1 on an AVX-512 one), so two programs that agree on
one CPU may disagree on the next. Nothing such an input shows says whether they compute
the same function.

`guard(module, fill)` rewrites each such op (not on `index` values: shapes and loop bounds)
so that the program is defined everywhere: where the op is defined it computes as before;
elsewhere it yields `fill` (0, or all ones), and a divisor is replaced by 1 first so
nothing traps. A program is *defined* on an input when its two guarded versions (`ZERO`
and `ONES`) give the same outputs: then no undefined value reached an output, and those
outputs are what the program means there. When they differ, one did: `localize` says which
op kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch_mlir import ir

from e2e.mutation.rewrites import CMPF, CMPI, _on_index, ops_named

ZERO, ONES = 0, -1  # the two fills: an integer result of all zero bits, of all one bits

FLOAT_TO_INT = ("arith.fptosi", "arith.fptoui")
SHIFTS = ("arith.shli", "arith.shrsi", "arith.shrui")
SIGNED_DIVISIONS = ("arith.divsi", "arith.remsi", "arith.ceildivsi", "arith.floordivsi")
UNSIGNED_DIVISIONS = ("arith.divui", "arith.remui", "arith.ceildivui")
GUARDED = FLOAT_TO_INT + SHIFTS + SIGNED_DIVISIONS + UNSIGNED_DIVISIONS


def rule(op_name: str, width: int) -> str:
    """Where `op_name` on `width`-bit integers is undefined, in words."""
    if op_name == "arith.fptosi":
        return f"poison: the truncated value is outside [-2^{width - 1}, 2^{width - 1}) or NaN"
    if op_name == "arith.fptoui":
        return f"poison: the truncated value is outside [0, 2^{width}) or NaN"
    if op_name in SHIFTS:
        return f"poison: a shift by {width} bits or more"
    if op_name in SIGNED_DIVISIONS:
        return "undefined: a zero divisor, or INT_MIN / -1"
    return "undefined: a zero divisor"


def _float_fits(value: float, float_type: ir.Type) -> bool:
    """Whether `value` is exactly representable (and finite) in `float_type`."""
    if isinstance(float_type, ir.F64Type):
        return math.isfinite(value)
    if isinstance(float_type, ir.F32Type):
        narrowed = float(np.float32(value))
    elif isinstance(float_type, ir.F16Type):
        narrowed = float(np.float16(value))
    elif isinstance(float_type, ir.BF16Type):
        narrowed = torch.tensor(value, dtype=torch.bfloat16).item()
    else:
        return False
    return math.isfinite(narrowed) and narrowed == value


def _cast_bounds(float_type: ir.Type, low: int, high: int) -> tuple[tuple[str, float], tuple[str, float]]:
    """Comparisons that hold exactly when trunc(x) lies in [low, high): (predicate, constant) twice.

    trunc(x) >= low  <=>  x > low - 1; where low - 1 is not representable no float lies
    strictly between it and low, so x >= low says the same. A bound beyond the type's range
    becomes +-inf: then every finite value is in range."""
    if _float_fits(low - 1, float_type):
        lower = ("ogt", float(low - 1))
    elif _float_fits(low, float_type):
        lower = ("oge", float(low))
    else:
        lower = ("ogt", -math.inf)
    upper = ("olt", float(high) if _float_fits(high, float_type) else math.inf)
    return lower, upper


class _Builder:
    """Ops inserted before one op, in generic form (no dialect builder quirks)."""

    def __init__(self, op: ir.Operation):
        self.op = op

    def create(self, name: str, operands, result_type, attributes=None) -> ir.Value:
        with ir.InsertionPoint(self.op), self.op.location:
            return ir.Operation.create(
                name, results=[result_type], operands=list(operands), attributes=attributes or {}
            ).results[0]

    def constant(self, value_type: ir.Type, value) -> ir.Value:
        attribute = (
            ir.FloatAttr.get(value_type, value)
            if not isinstance(value_type, ir.IntegerType)
            else ir.IntegerAttr.get(value_type, value)
        )
        return self.create("arith.constant", [], value_type, {"value": attribute})

    def compare(self, kind: str, predicate: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
        table = CMPF if kind == "arith.cmpf" else CMPI
        attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), table[predicate])
        return self.create(kind, [lhs, rhs], ir.IntegerType.get_signless(1), {"predicate": attribute})

    def both(self, first: ir.Value, second: ir.Value) -> ir.Value:
        return self.create("arith.andi", [first, second], ir.IntegerType.get_signless(1))

    def select(self, condition: ir.Value, if_true: ir.Value, if_false: ir.Value) -> ir.Value:
        return self.create("arith.select", [condition, if_true, if_false], if_true.type)


def _defined(op: ir.Operation, build: _Builder) -> ir.Value:
    """An i1 that is true where `op` is defined; divisors are made safe in place."""
    name = op.name
    if name in FLOAT_TO_INT:
        x = op.operands[0]
        width = op.results[0].type.width
        low, high = (-(1 << (width - 1)), 1 << (width - 1)) if name == "arith.fptosi" else (0, 1 << width)
        (lower_predicate, lower), (upper_predicate, upper) = _cast_bounds(x.type, low, high)
        above = build.compare("arith.cmpf", lower_predicate, x, build.constant(x.type, lower))
        below = build.compare("arith.cmpf", upper_predicate, x, build.constant(x.type, upper))
        return build.both(above, below)
    lhs, rhs = op.operands[0], op.operands[1]
    width = rhs.type.width
    if name in SHIFTS:
        ok = build.compare("arith.cmpi", "ult", rhs, build.constant(rhs.type, width))
        op.operands[1] = build.select(ok, rhs, build.constant(rhs.type, 0))
        return ok
    ok = build.compare("arith.cmpi", "ne", rhs, build.constant(rhs.type, 0))
    if name in SIGNED_DIVISIONS:
        minimum = build.compare("arith.cmpi", "eq", lhs, build.constant(lhs.type, -(1 << (width - 1))))
        minus_one = build.compare("arith.cmpi", "eq", rhs, build.constant(rhs.type, -1))
        overflow = build.both(minimum, minus_one)
        no_overflow = build.create("arith.xori", [overflow, build.constant(overflow.type, 1)], overflow.type)
        ok = build.both(ok, no_overflow)
    op.operands[1] = build.select(ok, rhs, build.constant(rhs.type, 1))
    return ok


@dataclass(frozen=True)
class Guarded:
    """What `guard` rewrote: op name -> integer width -> sites."""

    sites: dict[str, dict[int, int]]

    def kinds(self) -> list[str]:
        return sorted(self.sites)

    def describe(self, op_name: str) -> str:
        return "; ".join(f"{op_name} on i{width}: {rule(op_name, width)}" for width in sorted(self.sites[op_name]))


def _guardable(op: ir.Operation) -> bool:
    return (
        not _on_index(op)
        and len(op.results) == 1
        and isinstance(op.results[0].type, ir.IntegerType)
        and all(isinstance(v.type, (ir.IntegerType, ir.FloatType)) for v in op.operands)
    )


def guard(module: ir.Module, fill: int, only: tuple[str, ...] = GUARDED, other_fill: int | None = None) -> Guarded:
    """Make every op of `GUARDED` defined everywhere (in place): where it is undefined it yields
    `fill`. `only` limits which op kinds get `fill`; the others get `other_fill` (default: `fill`)."""
    sites: dict[str, dict[int, int]] = {}
    with module.context, ir.Location.unknown():
        for op in ops_named(module, GUARDED, fresh=True):
            if not _guardable(op):
                continue
            build = _Builder(op)
            ok = _defined(op, build)
            result = op.results[0]
            value = fill if op.name in only else (fill if other_fill is None else other_fill)
            with ir.InsertionPoint.after(op), op.location:
                constant = ir.Operation.create(
                    "arith.constant",
                    results=[result.type],
                    attributes={"value": ir.IntegerAttr.get(result.type, value)},
                )
                chosen = ir.Operation.create(
                    "arith.select", results=[result.type], operands=[ok, result, constant.results[0]]
                )
            result.replace_all_uses_except(chosen.results[0], chosen)
            width = result.type.width if op.name in FLOAT_TO_INT else op.operands[1].type.width
            by_width = sites.setdefault(op.name, {})
            by_width[width] = by_width.get(width, 0) + 1
    return Guarded(sites)


@dataclass
class Fill:
    """How a compile guards its program: `value` where an op of `only` is undefined, `other`
    where another guarded op is. `found` collects what the compiles guarded."""

    value: int
    only: tuple[str, ...] = GUARDED
    other: int | None = None
    found: dict[str, dict[int, int]] = field(default_factory=dict)

    def apply(self, module: ir.Module) -> None:
        guarded = guard(module, self.value, self.only, self.other)
        for name, widths in guarded.sites.items():
            mine = self.found.setdefault(name, {})
            for width, count in widths.items():
                mine[width] = mine.get(width, 0) + count

    def guarded(self) -> Guarded:
        return Guarded(self.found)
