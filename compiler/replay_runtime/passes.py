"""The Python passes the project's pipelines name, so that a bundle replays them.

`erase_dead_allocations` ends the JIT frontends' torch-backend stage
(`compiler.toolchain`). Execute-stage crashes reduce like compile crashes because two
Python passes frame the config's `lower` pipeline:

    python:compiler.replay_runtime.passes:record_main_signature   (first: @main's tensor
                                            types, kept as a module attribute)
    ...the lower pipeline...
    python:compiler.replay_runtime.passes:invoke_main   (last: JIT the LLVM module and
                                            call @main on inputs made from those types)

A candidate of that reduction is backend IR (linalg, tosa, ...), the crash its
signature. Inputs are deterministic and small (a dynamic dim is 3); the values rarely
matter to a crash (a failing `cf.assert`, an out-of-bounds access on the shapes).
"""

from __future__ import annotations

import re

import numpy as np
import torch
from torch_mlir import ir

from .engine import ELEMENT_DTYPES, RefBackendProgram

ERASE_DEAD_ALLOCATIONS = "python:compiler.replay_runtime.passes:erase_dead_allocations"
RECORD = "python:compiler.replay_runtime.passes:record_main_signature"
INVOKE = "python:compiler.replay_runtime.passes:invoke_main"
SIGNATURE_ATTR = "e2e.main_signature"
DYNAMIC_DIM = 3

# Ops without effects that decompositions leave dead (e.g. the saved statistics of an
# eval-mode `native_batch_norm`, typed `[0]` while lowered as `[C]`, which breaks
# the backend's `tensor.cast`); the torch-backend pipeline does not erase them.
_DEAD_ALLOCATIONS = frozenset({"torch.aten.empty.memory_format", "torch.aten.zeros", "torch.aten.ones"})


def erase_dead_allocations(module: ir.Module) -> None:
    for function in module.body.operations:
        if function.operation.name != "func.func":
            continue
        for block in function.regions[0].blocks:
            for op in reversed(list(block.operations)):
                if op.operation.name in _DEAD_ALLOCATIONS and all(not list(result.uses) for result in op.results):
                    op.operation.erase()


def _main(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name in ("func.func", "llvm.func") and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise ValueError("the module has no @main")


def record_main_signature(module: ir.Module) -> None:
    """Keep @main's function type on the module: lowering turns its arguments into unranked
    memrefs. A signature the module already carries stands: the reducer gives an execute
    crash's module its real inputs' sizes there (`e2e.reducer.reduce.give_input_sizes`)."""
    if SIGNATURE_ATTR in module.operation.attributes:
        return
    function_type = ir.TypeAttr(_main(module).attributes["function_type"])
    module.operation.attributes[SIGNATURE_ATTR] = ir.StringAttr.get(str(function_type.value))


def _tensor_types(text: str) -> list[tuple[list[int], torch.dtype]]:
    found = []
    for shape, element in re.findall(r"tensor<((?:[\d?]+x)*)(\w+)>", text):
        dims = [DYNAMIC_DIM if d == "?" else int(d) for d in shape.split("x") if d]
        found.append((dims, ELEMENT_DTYPES.get(element, torch.float32)))
    return found


def _input(shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    values = torch.arange(int(np.prod(shape)) if shape else 1, dtype=torch.float64).reshape(shape) % 7 - 3
    return (values > 0) if dtype == torch.bool else values.to(dtype)


def invoke_main(module: ir.Module) -> None:
    """Load the lowered module into the ExecutionEngine and call @main once."""
    recorded = ir.StringAttr(module.operation.attributes[SIGNATURE_ATTR]).value
    arguments, _, results = recorded.partition("->")
    inputs = [_input(shape, dtype) for shape, dtype in _tensor_types(arguments)]
    program = RefBackendProgram(module, [dtype for _, dtype in _tensor_types(results)])
    program(*inputs)
    program.close()


def output_dim_innermost(module: ir.Module) -> None:
    """Reorder each `linalg.generic` whose innermost dim is a reduction so that the output's
    contiguous dim is innermost instead: matmul (i, j, k) becomes (i, k, j), a convolution's
    output width goes inside its kernel loops.

    `convert-linalg-to-loops` nests loops in the generic's dim order, so a matmul's
    innermost loop walks a column of B: strided, which LLVM's loop vectorizer leaves
    scalar. With the output's last dim innermost, every operand that uses it is read
    contiguously and the others are invariant, and the loop vectorizes. Each output
    element still sums its reduction dims in the same order: the values are the same, bit
    for bit. A generic is left alone if that dim is not a plain output dim, if an operand
    would be read strided along it, or if its body reads loop indices (`linalg.index`).
    """
    for op in operations(module.operation):
        if op.name == "linalg.generic":
            _move_output_dim_innermost(op)


def operations(op: ir.Operation):
    """Every operation nested in `op`, outer before inner."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from operations(child.operation)


def _uses_dim(expr: ir.AffineExpr, dim: int) -> bool:
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == dim
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses_dim(expr.lhs, dim) or _uses_dim(expr.rhs, dim)
    return False


def _unit_stride_in(expr: ir.AffineExpr, dim: int) -> bool:
    """`expr` is `d<dim>` plus terms without it (`d3 + d6`): consecutive `dim` values are consecutive elements."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == dim
    if isinstance(expr, ir.AffineAddExpr):
        return (_unit_stride_in(expr.lhs, dim) and not _uses_dim(expr.rhs, dim)) or (
            _unit_stride_in(expr.rhs, dim) and not _uses_dim(expr.lhs, dim)
        )
    return False


def _move_output_dim_innermost(op: ir.Operation) -> None:
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    count = len(iterators)
    if not count or "reduction" not in str(iterators[-1]) or not maps[-1].results:
        return
    last = maps[-1].results[-1]
    if not isinstance(last, ir.AffineDimExpr):
        return
    dim = last.position
    if "parallel" not in str(iterators[dim]):
        return
    for indexing in maps:
        results = list(indexing.results)
        if any(_uses_dim(r, dim) for r in results[:-1]):
            return
        if results and _uses_dim(results[-1], dim) and not _unit_stride_in(results[-1], dim):
            return
    if any(child.name == "linalg.index" for child in operations(op)):
        return
    order = [d for d in range(count) if d != dim] + [dim]  # new dim position -> old dim
    with op.context:
        old_as_new = ir.AffineMap.get(count, 0, [ir.AffineDimExpr.get(order.index(d)) for d in range(count)])
        op.attributes["indexing_maps"] = ir.ArrayAttr.get(
            [
                ir.AffineMapAttr.get(ir.AffineMap.get(count, m.n_symbols, [r.compose(old_as_new) for r in m.results]))
                for m in maps
            ]
        )
        op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in order])
