"""Compile through the JIT IR importer: the `ltc` and `torchscript` frontends.

    from compiler.jit_compile import compile_jit_module
    compiled = compile_jit_module(model, (x,), frontend="ltc")
    compiled(x)

Stages: `capture` (lazy trace, or torch.jit.script/trace) -> `import` (JIT IR importer)
-> `torch-backend` (`toolchain.TO_TORCH_BACKEND[frontend]`, pass by pass: `run_torch_backend`, the reducer's too);
the rest is `compile_torch_backend_ir`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from torch_mlir import ir

from compiler.backend_compile import compile_torch_backend_ir
from compiler.frontends import jit, lazy, torchscript
from compiler.refbackend import RefBackendProgram
from compiler.stages import Snapshots, StageError, module_text, parse_module, run_stage
from compiler.toolchain import TO_TORCH_BACKEND

__all__ = [
    "FRONTENDS",
    "JitCompiledModule",
    "JitImport",
    "JitTorchBackendIR",
    "StaticShapesOnly",
    "compile_jit_module",
    "jit_import",
    "jit_to_torch_backend_ir",
    "jit_torch_backend",
    "run_torch_backend",
]

FRONTENDS = ("ltc", "torchscript")


class StaticShapesOnly(ValueError):
    """Dynamic dims were asked for, but the capture recorded static shapes (LTC, torch.jit.trace)."""


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


def jit_import(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    frontend: str = "ltc",
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    snapshots: Snapshots | None = None,
    method: str = "forward",
    static_ok: bool = True,
) -> JitImport:
    """capture -> import for the `ltc` or `torchscript` frontend.

    LTC traces are static: `dynamic_dims` only affects `torchscript` (when scripted).
    With `static_ok=False`, dynamic dims that the capture cannot honour raise
    `StaticShapesOnly` before anything is imported.
    """
    snapshots = snapshots if snapshots is not None else Snapshots()
    notes: dict[str, Any] = {}
    dynamic = any(shape and -1 in shape for shape in dynamic_dims or [])
    snapshots.enter("capture")
    if frontend == "ltc":
        if dynamic and not static_ok:
            raise StaticShapesOnly(f"ltc traces static shapes; dynamic dims {list(dynamic_dims)} were asked for")
        captured = lazy.capture(module, example_inputs, method)
        notes["capture"] = "lazy"
    elif frontend == "torchscript":
        captured = torchscript.capture(module, example_inputs, dynamic_dims, method)
        notes["capture"] = captured.method
        if captured.fallback_reason:
            notes["fallback_reason"] = captured.fallback_reason
        if dynamic and captured.method == "trace" and not static_ok:
            raise StaticShapesOnly(
                f"torchscript fell back to torch.jit.trace, which traces static shapes; dynamic dims "
                f"{list(dynamic_dims)} were asked for ({captured.fallback_reason})"
            )
    else:
        raise ValueError(f"unknown JIT frontend {frontend!r}; known: {', '.join(FRONTENDS)}")
    notes["static_shapes"] = not (dynamic and notes["capture"] == "script")

    snapshots.enter("import")
    imported = jit.import_graph(captured.graph, captured.graph_inputs)
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
        str(captured.graph),
        notes,
        list(imported.unknown_ops),
    )


def jit_torch_backend(imported: JitImport, frontend: str, snapshots: Snapshots | None = None) -> JitTorchBackendIR:
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
    frontend: str = "ltc",
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    snapshots: Snapshots | None = None,
    method: str = "forward",
    static_ok: bool = True,
) -> JitTorchBackendIR:
    """capture -> import -> torch-backend for the `ltc` or `torchscript` frontend
    (`jit_import`, then `jit_torch_backend`)."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    imported = jit_import(
        module, example_inputs, frontend, dynamic_dims, snapshots=snapshots, method=method, static_ok=static_ok
    )
    return jit_torch_backend(imported, frontend, snapshots)


def run_torch_backend(module: ir.Module, frontend: str, snapshots: Snapshots | None = None) -> ir.Module:
    """Stage `torch-backend` of a JIT frontend's imported module; returns the torch backend module.

    Run pass by pass (`run_stage(pass_by_pass=True)`): the pipeline's costly pass,
    `torch-lower-to-backend-contract`, is where these frontends' lowering fails, after
    ten iterations that each parse torch-mlir's shape and dtype library twice; run whole,
    a failure ran it once more to be localized.
    """
    return run_stage(module, "torch-backend", TO_TORCH_BACKEND[frontend], snapshots, pass_by_pass=True)


def _result_count(module) -> int:
    for op in module.body.operations:
        if op.operation.name == "func.func":
            return len(op.type.results)
    return 0


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
    frontend: str = "ltc",
    backend: str = "linalg",
    *,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    snapshots: Snapshots | None = None,
    opt_level: int = 0,
) -> JitCompiledModule:
    """Compile `module.forward` through the `ltc` or `torchscript` frontend for `backend`."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    lowered = jit_to_torch_backend_ir(module, example_inputs, frontend, dynamic_dims, snapshots=snapshots)
    program = compile_torch_backend_ir(lowered.torch_backend_ir, backend, snapshots=snapshots, opt_level=opt_level)
    return JitCompiledModule(frontend, backend, program, lowered, snapshots)
