"""FX frontend: torch.export -> decompositions -> torch-mlir's FxImporter (`FxFrontend`).

Stage `capture` is `torch.export` plus the decompositions torch-mlir expects; stage
`import` is the FxImporter, which keeps parameters and buffers as `dense_resource`
constants (never elided).

`capture` exports non-strict with the asked dynamic dims first; a program that export
cannot take that way (`int(t)`, `t.item()` raise `GuardOnDataDependentSymNode`) is
retried with strict export (upstream's mode), then with static shapes, and the
fallback is written to the caller's `notes`. `import_program` returns only the user
outputs from @main: torch.export adds the new values of mutated inputs and buffers as
outputs, which upstream's configs drop as well.

`fx_capture` and `fx_import_captured` are the two stages apart (`fx_import` runs both), as
the frontend runs them; a capture is kept across processes as `fx_kept.FxCapture`.
"""

from __future__ import annotations

import functools
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export import Dim, ExportedProgram
from torch.export.graph_signature import OutputKind
from torch_mlir import ir
from torch_mlir.dialects import func
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

from compiler import pipelines
from compiler.backend_compile import compile_torch_backend_ir, torch_backend_ir
from compiler.frontends import KEEPS_CAPTURE, ReducerFacts
from compiler.frontends.base import BaseFrontend
from compiler.frontends.decompose import run_decompositions
from compiler.frontends.fx_kept import FxCapture
from compiler.replay_runtime.frontend_step import StepFailure, export_program
from compiler.replay_runtime.mlir import python_diagnostics
from compiler.stages import Snapshots, StageError, first_line, module_text, new_context


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


@dataclass
class FxImport:
    """`module.<method>` captured by torch.export and imported (raw torch dialect)."""

    raw_ir: str
    out_spec: Any  # pytree spec of the user outputs
    notes: list[str] = field(default_factory=list)  # capture fallbacks, dropped mutations
    # The captured (decomposed) ExportedProgram, to run natively; not sent between processes.
    exported: Any = None
    # Not set by the FX frontend: its program stays keyed by the dynamic dims asked for even
    # when torch.export fell back to static shapes (then other shapes fail at execute).
    static_fallback: bool = False

    def __getstate__(self) -> dict:
        return {**self.__dict__, "exported": None}

    @property
    def result_notes(self) -> list[str]:
        return self.notes

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        """@main takes the call's tensors, in order."""
        return [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]


def fx_import(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
) -> FxImport:
    """Stages capture -> import of `module.<method>`."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    captured = fx_capture(module, example_inputs, dynamic_dims, method=method, snapshots=snapshots)
    return fx_import_captured(captured, snapshots=snapshots)


def fx_capture(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
) -> FxCapture:
    """Stage capture of `module.<method>`: torch.export and torch-mlir's decompositions."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    notes: list[str] = []
    snapshots.enter("capture")
    return FxCapture(capture(module, example_inputs, dynamic_dims, method, notes), notes)


class WarmUpModule(torch.nn.Module):
    """What a frontend's warm-up captures (every frontend's: a matmul, a tanh, a reduction)."""

    def forward(self, x):
        return torch.tanh(x @ x.t()).sum(0) + 1


@functools.cache
def warm_up_capture_imports() -> None:
    """What the first FX capture imports and builds before it traces anything (torch.export's
    tracer, which imports torch._dynamo; torch-mlir's decomposition table): two thirds of
    `warm_up_capture`, none of it work on the warm-up's own module."""
    import torch.export._trace  # noqa: F401 - imports torch._dynamo
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    get_decomposition_table()


@functools.cache
def warm_up_capture() -> None:
    """The first FX capture's one-time initialization alone (importing torch.export's
    tracer and torch._dynamo, the first export, the FX importer: ~1.5 s, most of a
    one-pair run's pair), what a spare host pays before its test is known; and the first
    `torch.export.save` (~35 ms of lazy initialization), which each host forked after would
    pay again for its first capture the frontend cache keeps."""
    captured = fx_capture(WarmUpModule(), [torch.rand(3, 3)], [[-1, 3]])
    pickle.dumps(captured)  # before the import, as the cache does: the importer freezes the program
    fx_import_captured(captured)


@functools.cache
def warm_up() -> None:
    """Pay once per process, before any fork, for what every child would pay again.

    The first torch.export, decomposition table, FX import and pass pipelines of a
    process take ~1-3 s of lazy initialization; a child's warm-up dies with it. Run
    here, the children inherit it. With the second capture below, `decompose` has recorded
    torch's decomposition override, and a host forked after this replays it on its first
    capture (recording it took ~50 ms of a first capture, measured in one process).
    """
    warm_up_capture()
    torch_ir, _ = fx_to_torch_backend_ir(WarmUpModule(), [torch.rand(3, 3)], [[-1, 3]])
    for backend in pipelines.BACKENDS:
        try:
            compile_torch_backend_ir(torch_ir, backend).close()
        except StageError:
            pass  # a backend that cannot lower the warm-up still warmed its passes


@dataclass(frozen=True)
class FxFrontend(BaseFrontend):
    """torch.export (with torch-mlir's decompositions), then torch-mlir's FxImporter."""

    name = "fx"
    keeps = KEEPS_CAPTURE
    # The modules a capture runs beyond the framework's: torch.export and the decompositions,
    # with torch-mlir's decomposition table (which a torch-mlir upgrade may change and a
    # rebuild of its native libraries does not). Not the importer: an edit to it keeps captures.
    capture_sources = (
        "compiler.frontends.fx",
        "compiler.frontends.fx_kept",
        "compiler.frontends.decompose",
        "torch_mlir.extras.fx_decomp_util",
    )
    reducer = ReducerFacts(
        repro_step="fx",
        torch_only_decompositions=True,
        repro_step_words="`torch.export` + torch-mlir's decompositions + `FxImporter`",
    )

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> FxCapture:
        return fx_capture(module, inputs, dynamic_dims, method=method, snapshots=snapshots)

    def import_capture(self, captured: FxCapture, snapshots: Snapshots) -> FxImport:
        return fx_import_captured(captured, snapshots=snapshots)

    def warm_up(self) -> None:
        warm_up()

    def warm_up_capture(self) -> None:
        """The capture's one-time initialization alone (what a collection pays while it probes)."""
        warm_up_capture()

    def spare_warm_up(self) -> tuple:
        """The capture's imports, then its one-time initialization: a spare whose test came
        during the first stops after it (the rest its pair pays, as it would have)."""
        return (warm_up_capture_imports, warm_up_capture)

    def check(self, module, inputs, dynamic_dims) -> None:
        import_program(capture(module, inputs, dynamic_dims))


def fx_import_captured(captured: FxCapture, *, snapshots: Snapshots | None = None) -> FxImport:
    """Stage import of a capture (FxImporter; it freezes `captured.program` in place)."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    program, notes = captured.program, list(captured.notes)
    snapshots.enter("import")
    raw = import_program(program)
    if mutated := mutated_inputs(program):
        notes.append(f"updated in place and not compared (as upstream): {', '.join(mutated)}")
    return FxImport(module_text(raw), program.call_spec.out_spec, notes, program)


def fx_to_torch_backend_ir(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
    backend_legal_ops: Sequence[str] = (),
) -> tuple[str, Any]:
    """capture -> import -> torch-backend of `module.<method>`.

    Returns (torch backend IR text, output pytree spec).
    """
    imported = fx_import(module, example_inputs, dynamic_dims, method=method, snapshots=snapshots)
    return torch_backend_ir(imported.raw_ir, backend_legal_ops, snapshots=snapshots), imported.out_spec
