"""IR rewrites a mutation is made of: small, composable, each counting the sites it changes.

A rewrite is `rewrite(module, apply) -> sites`: with `apply=False` it only counts the
ops it would change (how a test is found to be reached, without running it); with
`apply=True` it changes them in place. Integer rewrites leave `index` values alone:
those are shapes and loop bounds, whose corruption crashes every program instead of
modelling a lowering bug in the values a test computes.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

from torch_mlir import ir

Rewrite = Callable[[ir.Module, bool], int]

# arith's predicate enums (the attribute is their i64 value).
CMPF = dict(
    false=0,
    oeq=1,
    ogt=2,
    oge=3,
    olt=4,
    ole=5,
    one=6,
    ord=7,
    ueq=8,
    ugt=9,
    uge=10,
    ult=11,
    ule=12,
    une=13,
    uno=14,
    true=15,
)
CMPI = dict(eq=0, ne=1, slt=2, sle=3, sgt=4, sge=5, ult=6, ule=7, ugt=8, uge=9)


def walk(module: ir.Module) -> Iterator[ir.Operation]:
    """Every op of the module, nested ones included (a snapshot: safe to rewrite while walking)."""

    def visit(operations):
        for op in operations:
            yield op.operation
            for region in op.operation.regions:
                for block in region.blocks:
                    yield from visit(block.operations)

    return iter(list(visit(module.body.operations)))


def _on_index(op: ir.Operation) -> bool:
    return any(isinstance(v.type, ir.IndexType) for v in [*op.operands, *op.results])


def _attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    return {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}


def _replace(op: ir.Operation, name: str, operands=None, attributes=None) -> None:
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(
            name,
            results=[r.type for r in op.results],
            operands=list(op.operands) if operands is None else operands,
            attributes=_attributes(op) if attributes is None else attributes,
        )
    for old_result, new_result in zip(op.results, new.results):
        old_result.replace_all_uses_with(new_result)
    op.erase()


_INDEX: list = [None, None]  # (module, {op name: ops}) of the module last counted


def ops_named(module: ir.Module, names: tuple[str, ...], fresh: bool) -> list[ir.Operation]:
    """The module's ops with one of `names`. Counting many mutations on one module walks it
    once (`fresh=False` reuses the last walk); a rewrite that applies walks afresh."""
    if fresh or _INDEX[0] is not module:
        index: dict[str, list[ir.Operation]] = {}
        for op in walk(module):
            index.setdefault(op.name, []).append(op)
        _INDEX[:] = [None if fresh else module, index]
        by_name = index
    else:
        by_name = _INDEX[1]
    return [op for name in names for op in by_name.get(name, ())]


def _rewrite_ops(
    names: tuple[str, ...], match: Callable[[ir.Operation], bool], change: Callable[[ir.Operation], None]
) -> Rewrite:
    def rewrite(module: ir.Module, apply: bool) -> int:
        sites = 0
        with module.context, ir.Location.unknown():
            for op in ops_named(module, names, fresh=apply):
                if match(op):
                    sites += 1
                    if apply:
                        change(op)
        return sites

    return rewrite


def predicate(op_name: str, old: str, new: str) -> Rewrite:
    """`arith.cmpf`/`arith.cmpi` with predicate `old` compiled as `new` (not on index values)."""
    table = CMPF if op_name == "arith.cmpf" else CMPI

    def match(op):
        return (
            op.name == op_name and not _on_index(op) and ir.IntegerAttr(op.attributes["predicate"]).value == table[old]
        )

    def change(op):
        op.attributes["predicate"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), table[new])

    return _rewrite_ops((op_name,), match, change)


def rename(old: str, new: str) -> Rewrite:
    """Every `old` op becomes a `new` op on the same operands and attributes (a neighbour op)."""
    return _rewrite_ops((old,), lambda op: not _on_index(op), lambda op: _replace(op, new))


def swap_operands(op_name: str, first: int = 0, second: int = 1) -> Rewrite:
    """`op_name`'s operands `first` and `second` exchanged (`a - b` as `b - a`)."""

    def match(op):
        return (
            op.name == op_name
            and not _on_index(op)
            and len(op.operands) > max(first, second)
            and op.operands[first] != op.operands[second]
        )

    def change(op):
        operands = list(op.operands)
        operands[first], operands[second] = operands[second], operands[first]
        _replace(op, op.name, operands)

    return _rewrite_ops((op_name,), match, change)


def _scalar_constant(op: ir.Operation, kind) -> bool:
    return op.name == "arith.constant" and len(op.results) == 1 and isinstance(op.results[0].type, kind)


def int_constant(delta: int) -> Rewrite:
    """Scalar integer constants (not index, not i1) off by `delta`."""

    def match(op):
        return (
            _scalar_constant(op, ir.IntegerType)
            and op.results[0].type.width > 1
            and isinstance(op.attributes["value"], ir.IntegerAttr)
        )

    def change(op):
        value = ir.IntegerAttr(op.attributes["value"])
        half = 1 << (op.results[0].type.width - 1)  # wraps as the integer type does (max + 1 is min)
        op.attributes["value"] = ir.IntegerAttr.get(value.type, (value.value + delta + half) % (2 * half) - half)

    return _rewrite_ops(("arith.constant",), match, change)


def float_constant(select: Callable[[float], bool], new: float) -> Rewrite:
    """Scalar float constants whose value `select`s, replaced by `new`."""

    def match(op):
        return (
            _scalar_constant(op, ir.FloatType)
            and isinstance(op.attributes["value"], ir.FloatAttr)
            and select(op.attributes["value"].value)
        )

    def change(op):
        value = ir.FloatAttr(op.attributes["value"])
        op.attributes["value"] = ir.FloatAttr.get(value.type, new)

    return _rewrite_ops(("arith.constant",), match, change)


def lowest(value: float) -> bool:
    """-inf or the most negative finite value of some float type: a max reduction's init."""
    return value == -math.inf or value in (
        -3.4028234663852886e38,
        -1.7976931348623157e308,
        -65504.0,
        -3.3895313892515355e38,
    )


def highest(value: float) -> bool:
    return lowest(-value)
