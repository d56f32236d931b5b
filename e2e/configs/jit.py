"""The JIT-IR configs: a TorchScript graph (from LTC or torch.jit) -> the project's JIT IR
importer -> torch-function-to-torch-backend -> linalg -> RefBackend, executed and compared
like every other config (upstream's LTC config only checked the imported IR).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.utils._pytree as pytree

from compiler import compile_torch_backend_ir
from compiler.jit_compile import jit_to_torch_backend_ir
from compiler.stages import Snapshots
from compiler.toolchain import Toolchain, toolchain
from e2e.configs.fx import Compiled
from e2e.framework.trace import Trace, TraceItem


@dataclass(frozen=True)
class JitConfig:
    name: str
    frontend: str  # "ltc" or "torchscript" (compiler.jit_compile.FRONTENDS)
    backend: str = "linalg"

    def toolchain(self) -> Toolchain:
        """Frontend and per-stage pipelines, for replaying this config's failures."""
        return toolchain(self.frontend, self.backend)

    def compile(self, prepared, snapshots: Snapshots) -> Compiled:
        compiled = Compiled({})
        for method in prepared.methods():
            lowered = jit_to_torch_backend_ir(
                prepared.module,
                prepared.first_call(method),
                self.frontend,
                prepared.arg_shapes(method),
                snapshots=snapshots,
                method=method,
            )
            if "fallback_reason" in lowered.notes:
                compiled.notes.append(f"torch.jit.script failed, traced instead: {lowered.notes['fallback_reason']}")
            program = compile_torch_backend_ir(lowered.torch_backend_ir, self.backend, snapshots=snapshots)
            compiled.programs[method] = (program, lowered)
        return compiled

    def run(self, compiled: Compiled, golden: Trace) -> Trace:
        trace = []
        for item in golden:
            program, lowered = compiled.programs[item.method]
            flat = program(*lowered.arguments(item.inputs))
            trace.append(TraceItem(item.method, item.inputs, pytree.tree_unflatten(flat, lowered.out_spec)))
        return trace
