"""The FX configs: torch.export -> FxImporter -> torch backend -> <backend> -> RefBackend.

Capture and import depend only on the test, so they are computed once per test
(`PreparedTest.share`) and reused by every FX config; so is the torch-backend lowering,
per set of backend-legal ops (linalg keeps `aten.adaptive_max_pool2d`, as upstream).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler import compile_torch_backend_ir, fx_import, pipelines, torch_backend_ir
from compiler.stages import Snapshots
from compiler.toolchain import Toolchain, toolchain
from e2e.framework.trace import Trace, TraceItem


@dataclass
class Compiled:
    """One loaded program per method of the module, with its output structure."""

    programs: dict[str, tuple[Any, Any]]
    notes: list[str] = field(default_factory=list)


def tensor_leaves(inputs: list[Any]) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]


def run_programs(compiled: Compiled, golden: Trace) -> Trace:
    """Replay the golden calls on compiled programs, rebuilding the output structure."""
    trace = []
    for item in golden:
        program, out_spec = compiled.programs[item.method]
        flat = program(*tensor_leaves(item.inputs))
        outputs = pytree.tree_unflatten(flat, out_spec) if out_spec is not None else flat
        trace.append(TraceItem(item.method, item.inputs, outputs))
    return trace


@dataclass(frozen=True)
class FxConfig:
    name: str
    backend: str  # a key of compiler.pipelines.BACKENDS
    opt_level: int | None = None  # None: the RefBackend's policy (compiler.refbackend.opt_level_for)

    def toolchain(self) -> Toolchain:
        """Frontend and per-stage pipelines, for replaying this config's failures."""
        return toolchain("fx", self.backend)

    def compile(self, prepared, snapshots: Snapshots) -> Compiled:
        programs, notes = {}, []
        legal_ops = pipelines.BACKEND_LEGAL_OPS.get(self.backend, ())
        for method in prepared.methods():
            imported = prepared.share(("fx-import", method), lambda: _import(prepared, method, snapshots))
            notes.extend(imported.notes)
            torch_ir = prepared.share(
                ("fx", method, legal_ops),
                lambda: torch_backend_ir(imported.raw_ir, legal_ops, snapshots=snapshots),
            )
            program = compile_torch_backend_ir(torch_ir, self.backend, snapshots=snapshots, opt_level=self.opt_level)
            programs[method] = (program, imported.out_spec)
        return Compiled(programs, notes)

    def run(self, compiled: Compiled, golden: Trace) -> Trace:
        return run_programs(compiled, golden)


def _import(prepared, method: str, snapshots: Snapshots):
    return fx_import(
        prepared.module,
        prepared.first_call(method),
        prepared.arg_shapes(method),
        method=method,
        snapshots=snapshots,
    )
