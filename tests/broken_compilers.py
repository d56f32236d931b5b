"""Deliberately broken compilers for the reducer's tests and benchmark: Python passes over MLIR.

Each is named in a pipeline as `python:tests.broken_compilers:<function>`. `BROKEN` says
where each one goes (at torch-backend level, before the backend conversion, or at
linalg level, before the reference backend's lowering) and what it breaks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from torch_mlir import ir


@dataclass(frozen=True)
class Broken:
    name: str  # a function of this module
    level: str  # "torch" (runs on torch backend IR) or "linalg" (runs on linalg-on-tensors)
    kind: str  # "error" | "crash" | "mismatch": what the reducer should see
    guilty: tuple[str, ...]  # names a right reduction may blame (MLIR op or FX target)


BROKEN = (
    Broken("reject_exp", "linalg", "error", ("math.exp",)),
    Broken("abort_on_tanh", "linalg", "crash", ("math.tanh",)),
    Broken("mulf_to_addf", "linalg", "mismatch", ("aten.mul.Tensor",)),
    Broken("subf_to_addf", "linalg", "mismatch", ("aten.sub.Tensor",)),
    Broken("divf_to_mulf", "linalg", "mismatch", ("aten.div.Tensor", "aten._softmax.default")),
    Broken("reject_aten_tanh", "torch", "error", ("torch.aten.tanh",)),
    Broken("abort_on_aten_mm", "torch", "crash", ("torch.aten.mm",)),
    Broken("aten_sub_to_add", "torch", "mismatch", ("aten.sub.Tensor",)),
)


def _ops(module: ir.Module):
    def walk(operations):
        for op in operations:
            yield op.operation
            for region in op.operation.regions:
                for block in region.blocks:
                    yield from walk(block.operations)

    return list(walk(module.body.operations))


def _reject(module: ir.Module, op_name: str) -> None:
    if any(op.name == op_name for op in _ops(module)):
        raise RuntimeError(f"'{op_name}' op is not supported by this backend")


def _abort_on(module: ir.Module, op_name: str) -> None:
    if any(op.name == op_name for op in _ops(module)):
        os.abort()


def _swap(module: ir.Module, old: str, new: str) -> None:
    """A miscompile: every `old` op becomes a `new` op on the same operands."""
    with module.context, ir.Location.unknown():
        for op in _ops(module):
            if op.name != old:
                continue
            with ir.InsertionPoint(op):
                replacement = ir.Operation.create(
                    new,
                    results=[r.type for r in op.results],
                    operands=list(op.operands),
                    attributes={op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))},
                )
            for old_result, new_result in zip(op.results, replacement.results):
                old_result.replace_all_uses_with(new_result)
            op.erase()


def reject_exp(module: ir.Module) -> None:
    """A backend that cannot lower `math.exp`."""
    _reject(module, "math.exp")


def abort_on_tanh(module: ir.Module) -> None:
    """A backend that takes the process down on `math.tanh`."""
    _abort_on(module, "math.tanh")


def mulf_to_addf(module: ir.Module) -> None:
    _swap(module, "arith.mulf", "arith.addf")


def subf_to_addf(module: ir.Module) -> None:
    _swap(module, "arith.subf", "arith.addf")


def divf_to_mulf(module: ir.Module) -> None:
    _swap(module, "arith.divf", "arith.mulf")


def reject_aten_tanh(module: ir.Module) -> None:
    """A torch-backend lowering without `aten.tanh`."""
    _reject(module, "torch.aten.tanh")


def abort_on_aten_mm(module: ir.Module) -> None:
    _abort_on(module, "torch.aten.mm")


def abort_on_aten_mm_or_an_unbound_argument(module: ir.Module) -> None:
    """What torch-mlir's `torch-adjust-calling-conventions` did at 20261001 on a JIT
    frontend's `@main`: crash on one op kind (there `aten.any.dims`, here `aten.mm`), and
    on a `!torch.tensor` argument without a `torch.type_bound` (an input the frontends never
    give it, and a reduction must not make)."""
    _abort_on(module, "torch.aten.mm")
    for function in module.body.operations:
        arguments = function.regions[0].blocks[0].arguments
        attrs = list(ir.ArrayAttr(function.attributes["arg_attrs"])) if "arg_attrs" in function.attributes else []
        attrs += [ir.DictAttr.get({}, context=module.context)] * (len(arguments) - len(attrs))
        for argument, attr in zip(arguments, attrs):
            if str(argument.type) == "!torch.tensor" and "torch.type_bound" not in ir.DictAttr(attr):
                os.abort()


def abort_on_aten_mm_or_tanh(module: ir.Module) -> None:
    """Two crash bugs with one signature (the process aborts in this pass): only the ops
    that each reduction ends on tell them apart."""
    _abort_on(module, "torch.aten.mm")
    _abort_on(module, "torch.aten.tanh")


def aten_sub_to_add(module: ir.Module) -> None:
    """A torch-level miscompile: `aten.sub.Tensor` lowered as `aten.add.Tensor`."""
    _swap(module, "torch.aten.sub.Tensor", "torch.aten.add.Tensor")


def hang_on_tanh(module: ir.Module) -> None:
    """Never returns on a module with `math.tanh` (a pass stuck in a rewrite loop)."""
    if any(op.name == "math.tanh" for op in _ops(module)):
        while True:
            time.sleep(1)
