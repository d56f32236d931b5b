"""A module compiled in one call, callable like the module (the compiler's library API; the
suite's configs compile through their frontend objects and `compiler.toolchain` instead).

    from compiler import compile_module
    compiled = compile_module(model, (x,), backend="tosa")   # FX frontend
    compiled(x)                           # runs on MLIR's ExecutionEngine
    compiled.snapshots.texts["backend"]   # the IR each stage was given

    compiled = compile_jit_module(model, (x,), frontend="ltc")  # a JIT frontend: ltc or torchscript
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from compiler import pipelines
from compiler.backend_compile import compile_torch_backend_ir
from compiler.frontends import load_frontend
from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.frontends.jit_frontend import JitTorchBackendIR, jit_to_torch_backend_ir
from compiler.refbackend import RefBackendProgram
from compiler.stages import Snapshots


@dataclass
class CompiledModule:
    """A module compiled for one backend: callable like the module, with every stage's IR."""

    backend: str
    program: RefBackendProgram
    out_spec: Any
    snapshots: Snapshots = field(default_factory=Snapshots)

    def __call__(self, *inputs: Any) -> Any:
        tensors = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]
        flat = self.program(*tensors)
        return pytree.tree_unflatten(flat, self.out_spec) if self.out_spec is not None else flat

    def close(self) -> None:
        self.program.close()


def compile_module(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    backend: str = "linalg",
    *,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    opt_level: int | None = None,
) -> CompiledModule:
    """Compile `module.forward` for `backend` ("linalg", "tosa" or "stablehlo")."""
    snapshots = Snapshots()
    torch_ir, out_spec = fx_to_torch_backend_ir(
        module,
        example_inputs,
        dynamic_dims,
        snapshots=snapshots,
        backend_legal_ops=pipelines.BACKEND_LEGAL_OPS.get(backend, ()),
    )
    program = compile_torch_backend_ir(torch_ir, backend, snapshots=snapshots, opt_level=opt_level)
    return CompiledModule(backend, program, out_spec, snapshots)


@dataclass
class JitCompiledModule:
    """A module compiled through a JIT frontend: callable like the module."""

    frontend: str
    backend: str
    program: RefBackendProgram
    lowered: JitTorchBackendIR
    snapshots: Snapshots = field(default_factory=Snapshots)

    def __call__(self, *inputs: Any) -> Any:
        flat = self.program(*self.lowered.arguments(inputs))
        return pytree.tree_unflatten(flat, self.lowered.out_spec)

    def close(self) -> None:
        self.program.close()


def compile_jit_module(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    frontend: str,
    backend: str = "linalg",
    *,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    snapshots: Snapshots | None = None,
    opt_level: int = 0,
) -> JitCompiledModule:
    """Compile `module.forward` through the `ltc` or `torchscript` frontend for `backend`."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    lowered = jit_to_torch_backend_ir(
        module, example_inputs, load_frontend(frontend), dynamic_dims, snapshots=snapshots
    )
    program = compile_torch_backend_ir(lowered.torch_backend_ir, backend, snapshots=snapshots, opt_level=opt_level)
    return JitCompiledModule(frontend, backend, program, lowered, snapshots)
