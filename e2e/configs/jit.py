"""The JIT-IR configs: a TorchScript graph (from LTC or torch.jit) -> the project's JIT IR
importer -> torch-function-to-torch-backend -> linalg -> RefBackend, executed and compared
like every other config (upstream's LTC config only checked the imported IR).

A lazy trace and `torch.jit.trace` record static shapes. A test whose annotations ask
for dynamic dims is then not applicable (reported as skipped, never a pass): run it
with `--shapes static`. A static program is compiled for each distinct shape the test
calls the module with, and the result's notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler.backend_compile import compile_torch_backend_ir
from compiler.frontends.lazy import NotOnLazyDevice
from compiler.jit_compile import JitTorchBackendIR, StaticShapesOnly, jit_import, jit_torch_backend
from compiler.stages import Snapshots
from compiler.toolchain import Toolchain, toolchain
from e2e.framework.cache import IMPORT
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace, TraceItem, call_key

# Key of a program that takes every call of its method (compiled with dynamic dims).
ANY_SHAPE = None


def _shapes_text(inputs: list[Any]) -> str:
    tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
    return ", ".join(f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}" for x in tensors)


@dataclass
class JitCompiled:
    """Programs by (method, call_key) of the calls they were compiled for, or (method, ANY_SHAPE)."""

    programs: dict[tuple[str, Any], tuple[Any, JitTorchBackendIR]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def program_for(self, method: str, inputs: list[Any]) -> tuple[Any, JitTorchBackendIR] | None:
        return self.programs.get((method, ANY_SHAPE)) or self.programs.get((method, call_key(inputs)))

    def close(self) -> None:
        for program, _ in self.programs.values():
            program.close()


@dataclass(frozen=True)
class JitConfig:
    name: str
    frontend: str  # "ltc" or "torchscript" (compiler.jit_compile.FRONTENDS)
    backend: str = "linalg"

    def toolchain(self) -> Toolchain:
        """Frontend and per-stage pipelines, for replaying this config's failures."""
        return toolchain(self.frontend, self.backend)

    def compile(self, prepared, snapshots: Snapshots) -> JitCompiled:
        compiled = JitCompiled()
        for item in prepared.golden:
            if compiled.program_for(item.method, item.inputs) is None:
                self._compile_call(prepared, item, snapshots, compiled)
        return compiled

    def _compile_call(self, prepared, item: TraceItem, snapshots: Snapshots, compiled: JitCompiled) -> None:
        try:
            imported = prepared.share(  # once per test and, through the frontend cache, across runs
                ("jit-import", self.frontend, item.method, call_key(item.inputs)),
                lambda: jit_import(
                    prepared.module,
                    item.inputs,
                    self.frontend,
                    prepared.arg_shapes(item.method),
                    snapshots=snapshots,
                    method=item.method,
                    static_ok=False,
                ),
                across_runs=IMPORT,  # the JIT captures (a graph of live objects) are kept imported
            )
        except StaticShapesOnly as error:
            raise NotApplicable(f"{error}: run with --shapes static to compile the example inputs' shapes") from None
        except NotOnLazyDevice as error:
            raise NotApplicable(str(error)) from None
        lowered = jit_torch_backend(imported, self.frontend, snapshots)
        reason = lowered.notes.get("fallback_reason")
        if reason and not any(note.startswith("torch.jit.script failed") for note in compiled.notes):
            compiled.notes.append(f"torch.jit.script failed, traced instead: {reason}")
        program = compile_torch_backend_ir(lowered.torch_backend_ir, self.backend, snapshots=snapshots)
        if lowered.notes["static_shapes"]:
            compiled.programs[(item.method, call_key(item.inputs))] = (program, lowered)
            compiled.notes.append(f"compiled static shapes: {item.method}({_shapes_text(item.inputs)})")
        else:  # scripted with the annotated dynamic dims: one program takes every call
            compiled.programs[(item.method, ANY_SHAPE)] = (program, lowered)

    def run(self, compiled: JitCompiled, golden: Trace) -> Trace:
        trace = []
        for item in golden:
            program, lowered = compiled.program_for(item.method, item.inputs)
            flat = program(*lowered.arguments(item.inputs))
            trace.append(TraceItem(item.method, item.inputs, pytree.tree_unflatten(flat, lowered.out_spec)))
        return trace
