"""The FX configs: torch.export -> FxImporter -> torch backend -> <backend> -> an executor.

A config compiles with its toolchain's pipelines and executor (`compiler.toolchain`),
the same data the reducer replays. The executor is the RefBackend, or a real runtime
(`e2e.configs.runtime`).

Capture and import depend only on the test, so they are computed once per test
(`PreparedTest.share`) and reused by every FX config; so is the torch-backend lowering,
per set of backend-legal ops (linalg keeps `aten.adaptive_max_pool2d`, as upstream).
Across runs, the frontend cache keeps both: the import keyed by torch-mlir too, the
capture (the decomposed `ExportedProgram`) by torch, the test and the capture code only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler.backend_compile import compile_backend_ir, torch_backend_ir
from compiler.fx_compile import FxCapture, FxImport, fx_capture, fx_import_captured
from compiler.stages import Snapshots
from compiler.toolchain import TORCH_INPUT, Toolchain, toolchain
from e2e.configs.capture_check import CaptureCheck
from e2e.framework.cache import CAPTURE, IMPORT
from e2e.framework.judge import Explainer
from e2e.framework.registry import Tolerance
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace, TraceItem, call_key


@dataclass
class Compiled:
    """Loaded programs with their output structure, by (method, call_key) of the calls
    they were compiled for, or (method, None) for one compiled with the test's dynamic dims."""

    programs: dict[tuple[str, Any], tuple[Any, Any]]
    notes: list[str] = field(default_factory=list)
    imported: dict[tuple[str, Any], Any] = field(default_factory=dict)  # the FxImport of each program
    tolerance: Tolerance | None = None

    def program_for(self, method: str, inputs: list[Any]) -> tuple[Any, Any]:
        return self.programs.get((method, None)) or self.programs[(method, call_key(inputs))]

    def close(self) -> None:
        for program, _ in self.programs.values():
            program.close()


def tensor_leaves(inputs: list[Any]) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]


def run_programs(compiled: Compiled, golden: Trace) -> Trace:
    """Replay the golden calls on compiled programs, rebuilding the output structure."""
    trace = []
    for item in golden:
        program, out_spec = compiled.program_for(item.method, item.inputs)
        flat = program(*tensor_leaves(item.inputs))
        outputs = pytree.tree_unflatten(flat, out_spec) if out_spec is not None else flat
        trace.append(TraceItem(item.method, item.inputs, outputs))
    return trace


@dataclass(frozen=True)
class FxConfig:
    name: str
    backend: str  # a key of compiler.pipelines.BACKENDS, or "torch" for an executor's own torch input
    opt_level: int | None = None  # None: the RefBackend's policy (compiler.refbackend.opt_level_for)
    executor: str = "refbackend"  # a key of compiler.executors.EXECUTORS
    static: bool = False  # compile the calls' static shapes even where the test has dynamic dims

    def toolchain(self) -> Toolchain:
        """Frontend, per-stage pipelines and executor: what `compile` runs and the reducer replays."""
        return toolchain("fx", self.backend, self.executor)

    def compile(self, prepared, snapshots: Snapshots) -> Compiled:
        """One program per method when it has dynamic dims; else one per call shape (a static
        export takes only the shapes it was made for, and the program refuses others)."""
        chain = self.toolchain()
        executor = installed_executor(chain)
        static_only = self.static or getattr(executor, "static_only", False)
        compiled = Compiled({}, tolerance=prepared.test.tolerance)
        for item in prepared.golden:
            shapes = prepared.arg_shapes(item.method)
            dynamic = bool(shapes) and any(s and -1 in s for s in shapes)
            if dynamic and static_only:
                shapes, dynamic = None, False
                note = (
                    f"compiled static shapes: {chain.executor_name} takes no dynamic dims"
                    if not self.static
                    else "compiled static shapes"
                )
                if note not in compiled.notes:
                    compiled.notes.append(note)
            key = (item.method, None if dynamic else call_key(item.inputs))
            if key in compiled.programs:
                continue
            imported = shared_import(prepared, item, key, shapes, snapshots)
            compiled.notes.extend(n for n in imported.notes if n not in compiled.notes)
            compiled.imported[key] = imported
            if chain.backend == TORCH_INPUT:
                torch_ir = imported.raw_ir
            else:
                torch_ir = prepared.share(
                    ("fx", *key, chain.to_torch_backend),
                    lambda: torch_backend_ir(imported.raw_ir, snapshots=snapshots, pipeline=chain.to_torch_backend),
                )
            program = compile_backend_ir(torch_ir, chain, snapshots=snapshots, opt_level=self.opt_level)
            compiled.programs[key] = (program, imported.out_spec)
        return compiled

    def run(self, compiled: Compiled, golden: Trace) -> Trace:
        return run_programs(compiled, golden)

    def explainers(self) -> tuple[Explainer, ...]:
        return (CaptureCheck(recapture),)


def recapture(prepared, call: TraceItem, dynamic: bool):
    """The captured program of `call` again, as `compile` captured it: with the test's
    dynamic dims when its program was compiled with them, else at the call's shapes."""
    shapes = prepared.arg_shapes(call.method) if dynamic else None
    return _import(prepared, call, shapes, Snapshots()).exported


def installed_executor(chain: Toolchain):
    """The chain's executor; a pair whose runtime is not installed skips with its install line."""
    executor = chain.executor
    if (install := executor.missing()) is not None:
        raise NotApplicable(f"the {chain.executor_name} runtime is not installed: {install}")
    return executor


def shared_import(prepared, item: TraceItem, key: tuple, shapes, snapshots: Snapshots):
    """The capture and import of `item` (its program's `key`: method and call shapes, or
    None with dynamic `shapes`), once per test and, through the frontend cache, across runs:
    the import while torch-mlir is unchanged, the capture while torch and the test are
    (a rebuild of torch-mlir imports the capture of an earlier run again)."""
    dims = None if shapes is None else tuple(None if s is None else tuple(s) for s in shapes)
    return prepared.share(
        ("fx-import", *key, dims),
        lambda: _import_capture(prepared, item, key, shapes, dims, snapshots),
        across_runs=IMPORT,
    )


def _import_capture(prepared, item: TraceItem, key: tuple, shapes, dims, snapshots: Snapshots) -> FxImport:
    capture_key = ("fx-capture", *key, dims)
    captured = prepared.share(capture_key, lambda: _capture(prepared, item, shapes, snapshots), across_runs=CAPTURE)
    if capture_key in prepared.from_earlier_run:
        snapshots.enter("capture")  # this run's capture: loading the kept program (`FxCapture.program`)
    lost = captured.lost if captured.program is None else None
    if lost is not None:  # it did not survive torch.export.save / load: captured again
        prepared.from_earlier_run.discard(capture_key)
        captured = _capture(prepared, item, shapes, snapshots)
    imported = fx_import_captured(captured, snapshots=snapshots)
    if lost := lost or captured.lost:
        imported.notes.append(f"frontend cache: the capture is not kept across runs ({lost})")
    return imported


def _capture(prepared, item: TraceItem, shapes, snapshots: Snapshots) -> FxCapture:
    return fx_capture(prepared.module, item.inputs, shapes, method=item.method, snapshots=snapshots)


def _import(prepared, item: TraceItem, shapes, snapshots: Snapshots) -> FxImport:
    return fx_import_captured(_capture(prepared, item, shapes, snapshots), snapshots=snapshots)
