"""The pipeline configs: a frontend (`compiler.frontends`) captures and imports each call
-> torch backend -> <backend> -> an executor, with the compile loop written once.

    PipelineConfig("linalg", frontend="fx", backend="linalg")

A config compiles with its toolchain's pipelines and executor (`compiler.toolchain`),
the same data the reducer replays. The executor is the RefBackend, or a real runtime
(`e2e.configs.runtime`). What differs between frontends is the frontend object's: its
capture and import (an `Imported`: IR, how to call it, notes, whether it fell back to
static shapes), its torch-backend step, its warm-up, and what the frontend cache keeps.

One program per method when the test has dynamic dims (and the frontend and executor
take them); else one per call shape (a static program takes only the shapes it was made
for). Capture and import depend only on the test, so the test's `PreparedTest`
(`e2e.framework.prepared`) computes them once, for every config of the same frontend,
and keeps them across runs as the frontend says; so is the torch-backend lowering, per
pipeline.

The built-in configs are `CONFIGS`; `eager` is its own (`e2e/configs/eager.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler.backend_compile import compile_backend_ir
from compiler.frontends import load_frontend
from compiler.stages import Snapshots
from compiler.toolchain import TORCH_INPUT, Toolchain, toolchain
from e2e.configs.capture_check import CaptureCheck
from e2e.configs.onnx_oracle import OnnxOracle
from e2e.framework.judge import Explainer
from e2e.framework.registry import Tolerance
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace, TraceItem, call_key


@dataclass
class Compiled:
    """Loaded programs with what their frontend imported, by (method, call_key) of the calls
    they were compiled for, or (method, None) for one compiled with the test's dynamic dims."""

    programs: dict[tuple[str, Any], tuple[Any, Any]] = field(default_factory=dict)  # key -> (program, out_spec)
    notes: list[str] = field(default_factory=list)
    imported: dict[tuple[str, Any], Any] = field(default_factory=dict)  # the `Imported` of each program
    tolerance: Tolerance | None = None

    def key_for(self, method: str, inputs: list[Any]) -> tuple[str, Any]:
        return (method, None) if (method, None) in self.programs else (method, call_key(inputs))

    def program_for(self, method: str, inputs: list[Any]) -> tuple[Any, Any]:
        return self.programs[self.key_for(method, inputs)]

    def model_for(self, item: TraceItem) -> tuple[bytes, Any]:
        """The ONNX model a call's program was compiled from, and its output structure (`OnnxOracle`)."""
        key = self.key_for(item.method, item.inputs)
        return self.imported[key].model, self.programs[key][1]

    def close(self) -> None:
        for program, _ in self.programs.values():
            program.close()


def tensor_leaves(inputs: list[Any]) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]


def run_programs(compiled: Compiled, golden: Trace) -> Trace:
    """Replay the golden calls on compiled programs, rebuilding the output structure."""
    trace = []
    for item in golden:
        key = compiled.key_for(item.method, item.inputs)
        program, out_spec = compiled.programs[key]
        # A program compiled elsewhere (the mutation search's) takes the call's tensors.
        imported = compiled.imported.get(key)
        flat = program(*(imported.arguments(item.inputs) if imported is not None else tensor_leaves(item.inputs)))
        outputs = pytree.tree_unflatten(flat, out_spec) if out_spec is not None else flat
        trace.append(TraceItem(item.method, item.inputs, outputs))
    return trace


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    frontend: str  # a key of compiler.frontends.FRONTENDS (or an entry point)
    backend: str  # a key of compiler.pipelines.BACKENDS, or "torch" for an executor's own torch input
    executor: str = "refbackend"  # a key of compiler.executors.EXECUTORS
    opt_level: int | None = None  # None: the RefBackend's policy (compiler.refbackend.opt_level_for)
    static: bool = False  # compile the calls' static shapes even where the test has dynamic dims
    model_formats: tuple[str, ...] = ("torch",)  # what it compiles (`TakesModels`): the frontend's `given`
    explain_with: tuple[Explainer, ...] = ()  # asked after the runner judged (`e2e.framework.judge`)

    def toolchain(self) -> Toolchain:
        """Frontend, per-stage pipelines and executor: what `compile` runs and the reducer replays."""
        return toolchain(self.frontend, self.backend, self.executor)

    def explainers(self) -> tuple[Explainer, ...]:
        return self.explain_with

    def warm_up(self) -> None:
        """The frontend's first capture and import in a process (seconds), before hosts fork."""
        load_frontend(self.frontend).warm_up()

    def host_paid_warm_up(self, result) -> bool:
        """A capture the frontend cache did not have ran in the host."""
        return "capture" in (result.stage_seconds or {})

    def compile(self, prepared, snapshots: Snapshots) -> Compiled:
        chain = self.toolchain()
        frontend = chain.frontend
        if (missing := frontend.missing()) is not None:
            raise NotApplicable(f"the {self.name} config needs {missing}")
        executor = installed_executor(chain)
        static_only = self.static or getattr(executor, "static_only", False) or getattr(frontend, "static_only", False)
        given = frontend.given(prepared.module)
        to_torch_backend = None if chain.backend == TORCH_INPUT else chain.to_torch_backend
        compiled = Compiled(tolerance=prepared.test.tolerance)
        fell_back: set[str] = set()  # methods whose capture fell back to static shapes
        for item in prepared.golden:
            shapes = None if given is not None or item.method in fell_back else prepared.arg_shapes(item.method)
            dynamic = given is not None or (bool(shapes) and any(s and -1 in s for s in shapes))
            if dynamic and static_only and given is None:
                shapes, dynamic = None, False
                note = "compiled static shapes" if self.static else self._static_note(chain, executor)
                if note not in compiled.notes:
                    compiled.notes.append(note)
            key = (item.method, None if dynamic else call_key(item.inputs))
            if compiled.key_for(item.method, item.inputs) in compiled.programs:
                continue
            if given is not None:  # a model given as it is: imported by each config
                imported = frontend.import_capture(given, snapshots)
            else:
                imported = prepared.imported(frontend, item, key, shapes, snapshots)
            if imported.static_fallback and given is None:  # it takes this call's shapes alone
                fell_back.add(item.method)
                key = (item.method, call_key(item.inputs))
            imported.arguments(item.inputs)  # raises a StageError where the program takes other arguments
            compiled.notes.extend(n for n in imported.result_notes if n not in compiled.notes)
            if to_torch_backend is None:
                torch_ir = imported.raw_ir
            else:
                torch_ir = prepared.share(
                    (frontend.name, *key, to_torch_backend),
                    lambda: frontend.torch_backend_ir(imported, to_torch_backend, snapshots),
                )
            program = compile_backend_ir(torch_ir, chain, snapshots=snapshots, opt_level=self.opt_level)
            out_spec = imported.out_spec if imported.out_spec is not None else pytree.tree_flatten(item.outputs)[1]
            compiled.programs[key] = (program, out_spec)
            compiled.imported[key] = imported
        return compiled

    def run(self, compiled: Compiled, golden: Trace) -> Trace:
        return run_programs(compiled, golden)

    def _static_note(self, chain: Toolchain, executor) -> str:
        if getattr(executor, "static_only", False):
            return f"compiled static shapes: {chain.executor_name} takes no dynamic dims"
        return f"compiled static shapes: the {chain.frontend.name} frontend takes no dynamic dims"


def installed_executor(chain: Toolchain):
    """The chain's executor; a pair whose runtime is not installed skips with its install line."""
    executor = chain.executor
    if (install := executor.missing()) is not None:
        raise NotApplicable(f"the {chain.executor_name} runtime is not installed: {install}")
    return executor


FX_EXPLAINERS: tuple[Explainer, ...] = (CaptureCheck("fx"),)

# The built-in pipeline configs, by name.
CONFIGS: dict[str, PipelineConfig] = {
    "linalg": PipelineConfig("linalg", "fx", "linalg", explain_with=FX_EXPLAINERS),
    "tosa": PipelineConfig("tosa", "fx", "tosa", explain_with=FX_EXPLAINERS),
    "stablehlo": PipelineConfig("stablehlo", "fx", "stablehlo", explain_with=FX_EXPLAINERS),
    "ltc": PipelineConfig("ltc", "ltc", "linalg"),
    "torchscript": PipelineConfig("torchscript", "torchscript", "linalg"),
    "onnx": PipelineConfig("onnx", "onnx", "linalg", model_formats=("torch", "onnx"), explain_with=(OnnxOracle(),)),
    "dynamo": PipelineConfig("dynamo", "dynamo", "linalg"),
}
