"""What the JIT frontends share (`ltc`: `lazy.LtcFrontend`, `torchscript`:
`torchscript.TorchScriptFrontend`): their base `JitFrontend` and its stages.

Stages: `capture` (the frontend's `capture_graph`: a lazy trace, or torch.jit.script/trace)
-> `import` (the JIT IR importer, `compiler.frontends.jit`) -> `torch-backend`
(`JitFrontend.to_torch_backend`, pass by pass: `run_torch_backend`, the reducer's too); the
rest is `compile_torch_backend_ir`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from torch_mlir import ir

from compiler import pipelines
from compiler.frontends import KEEPS_CAPTURE, jit
from compiler.frontends.base import BaseFrontend
from compiler.replay_runtime.passes import ERASE_DEAD_ALLOCATIONS  # after the torch-backend pipeline
from compiler.stages import Snapshots, StageError, module_text, parse_module, run_stage


@dataclass
class JitTorchBackendIR:
    """The torch backend IR of a module, and how to call it."""

    torch_backend_ir: str
    # For each argument of @main, in order: its index among the flat tensor inputs
    # (`[x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]`).
    argument_indices: list[int]
    out_spec: pytree.TreeSpec
    # The captured TorchScript graph, as text (the input of stage `import`).
    jit_graph: str
    # Frontend details: {"capture": "script" | "trace" | "lazy", "fallback_reason": ...,
    # "static_shapes": whether the program takes only the example inputs' shapes}.
    notes: dict[str, Any] = field(default_factory=dict)

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
        return [tensors[i] for i in self.argument_indices]


@dataclass
class JitImport:
    """Stages `capture` and `import` of a JIT frontend: what `torch-backend` starts from,
    as text (kept across runs by the suite's frontend cache: torch and torch-mlir decide
    it, not this project's passes)."""

    raw_ir: str
    argument_indices: list[int]
    out_spec: pytree.TreeSpec
    jit_graph: str
    notes: dict[str, Any] = field(default_factory=dict)
    unknown_ops: list[str] = field(default_factory=list)  # imported as torch.operator
    shapes: str = ""  # the call's tensors, for the notes of a static program ("f32[3, 4]")
    method: str = "forward"
    static_fallback: bool = False  # never: dynamic dims a capture cannot honour raise StaticShapesOnly

    @property
    def result_notes(self) -> list[str]:
        notes = []
        if reason := self.notes.get("fallback_reason"):
            notes.append(f"torch.jit.script failed, traced instead: {reason}")
        if self.notes.get("static_shapes"):
            notes.append(f"compiled static shapes: {self.method}({self.shapes})")
        return notes

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
        return [tensors[i] for i in self.argument_indices]


@dataclass
class JitCapture:
    """Stage `capture` of a JIT frontend and the first half of its `import`: the TorchScript
    graph, and that graph written out as MLIR text by the project's JIT IR importer
    (`jit.emit_graph`), not yet parsed. Unlike the graph, it pickles: the suite's frontend
    cache keeps it across runs, keyed by torch, the test and the code that made it
    (`JitFrontend.capture_sources`: the importer and the torch dialect's op names), so a
    rebuild of torch-mlir's native libraries parses it again instead of capturing again."""

    emitted: jit.EmittedGraph
    argument_indices: list[int]
    out_spec: pytree.TreeSpec
    jit_graph: str  # the captured graph, as text
    notes: dict[str, Any] = field(default_factory=dict)
    shapes: str = ""
    method: str = "forward"
    lost = None  # not a field: text always pickles, so a kept capture is never lost

    def lost_on_the_way(self) -> str | None:
        return None


def jit_capture(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    frontend: JitFrontend,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    snapshots: Snapshots | None = None,
    method: str = "forward",
    static_ok: bool = True,
) -> JitCapture:
    """capture, then the importer's text, for the `ltc` or `torchscript` frontend.

    LTC traces are static: `dynamic_dims` only affects `torchscript` (when scripted).
    With `static_ok=False`, dynamic dims that the capture cannot honour raise
    `StaticShapesOnly` before anything is imported.
    """
    snapshots = snapshots if snapshots is not None else Snapshots()
    notes: dict[str, Any] = {}
    dynamic = any(shape and -1 in shape for shape in dynamic_dims or [])
    snapshots.enter("capture")
    captured = frontend.capture_graph(module, example_inputs, dynamic_dims, method, dynamic and not static_ok, notes)
    notes["static_shapes"] = not (dynamic and notes["capture"] == "script")

    snapshots.enter("import")
    emitted = jit.emit_graph(captured.graph, captured.graph_inputs)
    return JitCapture(
        emitted,
        captured.argument_indices,
        captured.out_spec,
        str(captured.graph),
        notes,
        _shapes_text(example_inputs),
        method,
    )


def jit_import_captured(captured: JitCapture, snapshots: Snapshots | None = None) -> JitImport:
    """Stage `import` of a capture: its text parsed by torch-mlir."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    snapshots.enter("import")
    imported = jit.parse_emitted(captured.emitted)
    expected_results = captured.out_spec.num_leaves
    results = _result_count(imported.module)
    if results != expected_results:
        raise StageError(
            "import",
            f"@main returns {results} tensors but the module's output has {expected_results}",
            input_ir=module_text(imported.module),
        )
    return JitImport(
        module_text(imported.module),
        captured.argument_indices,
        captured.out_spec,
        captured.jit_graph,
        captured.notes,
        list(imported.unknown_ops),
        captured.shapes,
        captured.method,
    )


def jit_torch_backend(
    imported: JitImport, frontend: JitFrontend, snapshots: Snapshots | None = None
) -> JitTorchBackendIR:
    """Stage `torch-backend` of an imported JIT program (parsed from its text, so a capture
    of an earlier run gives the same result as a new one)."""
    try:
        torch_backend = run_torch_backend(parse_module(imported.raw_ir), frontend, snapshots)
    except StageError as error:
        if not imported.unknown_ops:
            raise
        unknown = ", ".join(imported.unknown_ops)
        raise StageError(
            error.stage,
            f"ops unknown to the torch dialect (imported as torch.operator): {unknown}; {error.message}",
            failing_pass=error.failing_pass,
            diagnostics=error.diagnostics,
            input_ir=error.input_ir,
        ) from None
    return JitTorchBackendIR(
        module_text(torch_backend), imported.argument_indices, imported.out_spec, imported.jit_graph, imported.notes
    )


def jit_to_torch_backend_ir(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    frontend: JitFrontend,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    snapshots: Snapshots | None = None,
    method: str = "forward",
    static_ok: bool = True,
) -> JitTorchBackendIR:
    """capture -> import -> torch-backend for the `ltc` or `torchscript` frontend
    (`jit_capture`, `jit_import_captured`, then `jit_torch_backend`)."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    captured = jit_capture(
        module, example_inputs, frontend, dynamic_dims, snapshots=snapshots, method=method, static_ok=static_ok
    )
    return jit_torch_backend(jit_import_captured(captured, snapshots), frontend, snapshots)


def run_torch_backend(module: ir.Module, frontend: JitFrontend, snapshots: Snapshots | None = None) -> ir.Module:
    """Stage `torch-backend` of a JIT frontend's imported module; returns the torch backend module.

    Run pass by pass (`run_stage(pass_by_pass=True)`): the pipeline's costly pass,
    `torch-lower-to-backend-contract`, is where these frontends' lowering fails, after
    iterations that each parse torch-mlir's shape and dtype library twice (`stages.run_pass`
    stops them at a fixed point); run whole, a failure ran it once more to be localized.
    """
    return run_stage(module, "torch-backend", frontend.to_torch_backend(""), snapshots, pass_by_pass=True)


class JitFrontend(BaseFrontend):
    """A capture as a TorchScript graph, imported by the project's JIT IR importer."""

    keeps = KEEPS_CAPTURE  # as the importer's text: a torch-mlir rebuild parses it again
    # The modules a capture runs beyond the framework's (`JitCapture`): the trace or script,
    # the importer, and torch-mlir's generated op classes, whose names decide which ops the
    # importer writes as `torch.operator`.
    capture_sources = (
        "compiler.frontends.jit",
        "compiler.frontends.jit_types",
        "compiler.frontends.jit_frontend",
        "compiler.frontends.lazy",
        "compiler.frontends.torchscript",
        "compiler.refbackend",
        "torch_mlir.dialects._torch_ops_gen",
    )

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        return (*pipelines.JIT_TO_TORCH_BACKEND, ERASE_DEAD_ALLOCATIONS)

    def capture_graph(self, module, example_inputs, dynamic_dims, method: str, static_refused: bool, notes: dict):
        """The TorchScript graph of `module.<method>`; `static_refused`: raise
        `StaticShapesOnly` when it records static shapes although dynamic dims were asked for."""
        raise NotImplementedError

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> JitCapture:
        return jit_capture(module, inputs, self, dynamic_dims, snapshots=snapshots, method=method, static_ok=False)

    def import_capture(self, captured: JitCapture, snapshots: Snapshots) -> JitImport:
        return jit_import_captured(captured, snapshots)

    def torch_backend_ir(self, imported: JitImport, pipeline: pipelines.Pipeline, snapshots: Snapshots) -> str:
        return jit_torch_backend(imported, self, snapshots).torch_backend_ir

    def warm_up(self) -> None:
        """Nothing the FX frontend's warm-up does not pay."""


def _shapes_text(inputs: Sequence[object]) -> str:
    tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
    return ", ".join(f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}" for x in tensors)


def _result_count(module) -> int:
    for op in module.body.operations:
        if op.operation.name == "func.func":
            return len(op.type.results)
    return 0
