"""FX frontend: torch.export -> decompositions -> torch-mlir's FxImporter.

Stage `capture` is `torch.export` plus the decompositions torch-mlir expects; stage
`import` is the FxImporter, which keeps parameters and buffers as `dense_resource`
constants (never elided).
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

import torch
from torch.export import Dim, ExportedProgram
from torch_mlir import ir
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

from compiler.stages import StageError, first_line, new_context


def dynamic_shapes_for(
    forward: Callable[..., object],
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None,
) -> dict[str, object] | None:
    """torch.export `dynamic_shapes` from per-argument shapes where -1 marks a dynamic dim.

    Dims are `Dim.AUTO`: dynamic unless the program forces them static (torch.export
    specializes sizes 0 and 1), so upstream tests annotated `-1` export unchanged.
    """
    if not dynamic_dims or not any(shape and -1 in shape for shape in dynamic_dims):
        return None
    per_argument = []
    for value, shape in zip(example_inputs, dynamic_dims):
        if isinstance(value, torch.Tensor) and shape:
            per_argument.append({i: Dim.AUTO for i, size in enumerate(shape) if size == -1} or None)
        else:
            per_argument.append(None)
    per_argument += [None] * (len(example_inputs) - len(per_argument))
    # torch.export matches the spec to the signature: `*args` takes one tuple.
    spec: dict[str, object] = {}
    for parameter in inspect.signature(forward).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            spec[parameter.name] = tuple(per_argument)
            break
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if not per_argument:
                break
            spec[parameter.name] = per_argument.pop(0)
    return spec


def capture(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    method: str = "forward",
    *,
    decompose: bool = True,
) -> ExportedProgram:
    """Stage `capture`: export `module.<method>` and run torch-mlir's decompositions (unless not `decompose`)."""
    if method != "forward":
        module = _MethodAsForward(module, method)
    try:
        program = torch.export.export(
            module,
            tuple(example_inputs),
            dynamic_shapes=dynamic_shapes_for(module.forward, example_inputs, dynamic_dims),
            strict=False,
        )
        return program.run_decompositions(get_decomposition_table()) if decompose else program
    except Exception as error:
        raise StageError("capture", f"torch.export: {type(error).__name__}: {first_line(error)}") from error


def import_program(program: ExportedProgram, context: ir.Context | None = None) -> ir.Module:
    """Stage `import`: the exported program as a raw torch-dialect module (`@main`)."""
    importer = FxImporter(context=context or new_context())
    try:
        importer.import_frozen_program(program, func_name="main")
    except Exception as error:
        raise StageError("import", f"FxImporter: {type(error).__name__}: {first_line(error)}") from error
    return importer.module


class _MethodAsForward(torch.nn.Module):
    def __init__(self, module: torch.nn.Module, method: str):
        super().__init__()
        self.module = module
        self.method = method

    def forward(self, *args):
        return getattr(self.module, self.method)(*args)
