"""FX frontend: torch.export -> decompositions -> torch-mlir's FxImporter.

Stage `capture` is `torch.export` plus the decompositions torch-mlir expects; stage
`import` is the FxImporter, which keeps parameters and buffers as `dense_resource`
constants (never elided).

`capture` exports non-strict with the asked dynamic dims first; a program that export
cannot take that way (`int(t)`, `t.item()` raise `GuardOnDataDependentSymNode`) is
retried with strict export (upstream's mode), then with static shapes, and the
fallback is written to the caller's `notes`. `import_program` returns only the user
outputs from @main: torch.export adds the new values of mutated inputs and buffers as
outputs, which upstream's configs drop as well.
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

import torch
from torch.export import Dim, ExportedProgram
from torch.export.graph_signature import OutputKind
from torch_mlir import ir
from torch_mlir.dialects import func
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

from compiler.frontends.decompose import run_decompositions
from compiler.replay_runtime.frontend_step import StepFailure, export_program
from compiler.replay_runtime.mlir import python_diagnostics
from compiler.stages import StageError, first_line, new_context


def dynamic_shapes_for(
    forward: Callable[..., object],
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None,
) -> dict[str, object] | None:
    """torch.export `dynamic_shapes` from per-argument shapes where -1 marks a dynamic dim.

    Dims are `Dim.AUTO`: dynamic unless the program forces them static (torch.export
    specializes sizes 0 and 1), so upstream tests annotated `-1` export unchanged; and
    linked where the program equates them (a text model's input_ids and attention_mask
    share one batch and one sequence symbol), so no named `Dim` is needed for that.
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
    notes: list[str] | None = None,
    *,
    decompose: bool = True,
) -> ExportedProgram:
    """Stage `capture`: export `module.<method>` and run torch-mlir's decompositions
    (unless not `decompose`).

    Falls back to strict export, then to static shapes; a fallback taken is appended
    to `notes`.
    """
    if method != "forward":
        module = _MethodAsForward(module, method)
    dynamic_shapes = dynamic_shapes_for(module.forward, example_inputs, dynamic_dims)
    # (strict, dynamic_shapes, what the note says) in order of preference.
    attempts = [(False, dynamic_shapes, None), (True, dynamic_shapes, "strict torch.export (strict=True)")]
    if dynamic_shapes is not None:
        attempts.append((False, None, "static shapes (the example inputs' sizes; annotated -1 dims ignored)"))
    first_error: tuple[str, Exception] | None = None
    decompositions = (lambda program: run_decompositions(program, get_decomposition_table())) if decompose else None
    for strict, shapes, fallback in attempts:
        try:
            program = export_program(module, example_inputs, shapes, strict=strict, decompose=decompositions)
        except StepFailure as failure:
            first_error = first_error or (failure.step, failure.cause)
            continue
        if fallback is not None and notes is not None:
            step, error = first_error
            notes.append(
                f"capture fallback: exported with {fallback}; non-strict {step} failed with "
                f"{type(error).__name__}: {first_line(error)[:200]}"
            )
        return program
    step, error = first_error
    message = f"{step}: {type(error).__name__}: {first_line(error)}"
    # Raised once no exception is being handled: the first attempt's frames are given.
    raise StageError("capture", message, diagnostics=python_diagnostics(message, error)) from error


def import_program(program: ExportedProgram, context: ir.Context | None = None) -> ir.Module:
    """Stage `import`: the exported program as a raw torch-dialect module (`@main`)."""
    importer = FxImporter(context=context or new_context())
    try:
        importer.import_frozen_program(_NonPersistentBuffersInState(program), func_name="main")
    except Exception as error:
        raise StageError("import", f"FxImporter: {type(error).__name__}: {first_line(error)}") from error
    return_user_outputs_only(importer.module, program)
    return importer.module


def mutated_inputs(program: ExportedProgram) -> list[str]:
    """The user inputs and buffers the program updates in place."""
    return [
        spec.target or spec.arg.name
        for spec in program.graph_signature.output_specs
        if spec.kind in (OutputKind.USER_INPUT_MUTATION, OutputKind.BUFFER_MUTATION)
    ]


def return_user_outputs_only(module: ir.Module, program: ExportedProgram, entry: str = "main") -> None:
    """Drop the mutated-input and buffer outputs torch.export puts before the user outputs."""
    specs = program.graph_signature.output_specs
    keep = [i for i, spec in enumerate(specs) if spec.kind == OutputKind.USER_OUTPUT]
    if len(keep) == len(specs):
        return
    with module.context, ir.Location.unknown():
        for op in module.body.operations:
            if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
                break
        else:
            raise StageError("import", f"no function @{entry} in the imported module")
        block = op.regions[0].blocks[0]
        old_return = block.operations[len(block.operations) - 1]
        with ir.InsertionPoint(old_return):
            func.ReturnOp([old_return.operands[i] for i in keep])
        old_return.erase()
        function_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        results = [function_type.results[i] for i in keep]
        op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(function_type.inputs, results))


class _MethodAsForward(torch.nn.Module):
    def __init__(self, module: torch.nn.Module, method: str):
        super().__init__()
        self.module = module
        self.method = method

    def forward(self, *args):
        return getattr(self.module, self.method)(*args)


class _NonPersistentBuffersInState:
    """The program, its `state_dict` completed with its non-persistent buffers.

    torch.export keeps non-persistent buffers (rotary `inv_freq`, BERT's
    `position_ids`) in `constants`, not `state_dict`, where the FxImporter looks
    every buffer up.
    """

    def __init__(self, program: ExportedProgram):
        self._program = program
        constants = getattr(program, "constants", {})
        self.state_dict = {
            **{name: constants[name] for name in program.graph_signature.non_persistent_buffers if name in constants},
            **program.state_dict,
        }

    def __getattr__(self, name: str):
        return getattr(self._program, name)
