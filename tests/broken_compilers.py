"""Deliberately broken compilers for tests/test_reducer.py: Python passes over MLIR.

Each is named in a pipeline as `python:tests.broken_compilers:<function>`.
"""

from __future__ import annotations

import os

from torch_mlir import ir
from torch_mlir.dialects import arith


def _ops(module: ir.Module):
    def walk(operations):
        for op in operations:
            yield op.operation
            for region in op.operation.regions:
                for block in region.blocks:
                    yield from walk(block.operations)

    return list(walk(module.body.operations))


def reject_exp(module: ir.Module) -> None:
    """A backend that cannot lower `math.exp`."""
    if any(op.name == "math.exp" for op in _ops(module)):
        raise RuntimeError("'math.exp' op is not supported by this backend")


def abort_on_tanh(module: ir.Module) -> None:
    """A backend that takes the process down on `math.tanh`."""
    if any(op.name == "math.tanh" for op in _ops(module)):
        os.abort()


def mulf_to_addf(module: ir.Module) -> None:
    """A miscompile: every `arith.mulf` becomes `arith.addf`."""
    with module.context, ir.Location.unknown():
        for op in _ops(module):
            if op.name == "arith.mulf":
                with ir.InsertionPoint(op):
                    replacement = arith.AddFOp(op.operands[0], op.operands[1])
                op.results[0].replace_all_uses_with(replacement.result)
                op.erase()
