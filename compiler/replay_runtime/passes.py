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
    """Keep @main's function type on the module: lowering turns its arguments into unranked memrefs."""
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
