"""The bundled PyTorch -> MLIR compiler and its reference backend.

    from compiler import compile_module
    compiled = compile_module(model, (x,), backend="tosa")
    compiled(x)                           # runs on MLIR's ExecutionEngine
    compiled.snapshots.texts["backend"]   # the IR each stage was given

A library: it knows nothing of tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from torch_mlir import ir

from compiler import pipelines
from compiler.frontends import fx
from compiler.refbackend import TORCH_DTYPE_OF_MLIR, RefBackendProgram, ResultType, opt_level_for
from compiler.stages import (
    Snapshots,
    StageError,
    first_line,
    module_text,
    new_context,
    parse_module,
    run_stage,
    split_top_level,
)
from compiler.toolchain import TORCH_INPUT, Toolchain, toolchain

__all__ = [
    "CompiledModule",
    "Snapshots",
    "StageError",
    "compile_module",
    "FxImport",
    "compile_backend_ir",
    "compile_torch_backend_ir",
    "fx_import",
    "fx_to_torch_backend_ir",
    "torch_backend_ir",
    "result_dtypes",
]


# Scalar results of @main, in torch-dialect spelling, as the Python type they come back as.
SCALAR_RESULT_TYPES: dict[str, type] = {"!torch.int": int, "!torch.float": float, "!torch.bool": bool}


def result_dtypes(module: ir.Module | str, entry: str = "main") -> list[ResultType]:
    """The torch dtypes (or int / float / bool for scalars) of `entry`'s results,
    read from its torch-dialect signature."""
    text = module if isinstance(module, str) else module_text(module)
    match = re.search(rf"func\.func @{entry}\(.*?\)\s*->\s*(\(.*?\)|[^{{]+?)\s*(attributes|\{{)", text, re.S)
    if match is None:
        raise StageError("import", f"no function @{entry} with results in the module")
    results = match[1].strip()
    dtypes = []
    for type_text in _split_types(results):
        if type_text in SCALAR_RESULT_TYPES:
            dtypes.append(SCALAR_RESULT_TYPES[type_text])
            continue
        tensor = re.fullmatch(r"!torch\.vtensor<(?:\[[^\]]*\]|\*),\s*(.+)>", type_text)
        if tensor is None or tensor[1] not in TORCH_DTYPE_OF_MLIR:
            raise StageError(
                "import",
                f"result type {type_text} of @{entry} is not a tensor or scalar the reference backend returns",
            )
        dtypes.append(TORCH_DTYPE_OF_MLIR[tensor[1]])
    return dtypes


def _split_types(results: str) -> list[str]:
    """`(!torch.vtensor<[3,4],f32>, ...)` -> its types (`<` nests inside them)."""
    if results.startswith("(") and results.endswith(")"):
        results = results[1:-1]
    return split_top_level(results, "<[(", ">])")


@dataclass
class FxImport:
    """`module.<method>` captured by torch.export and imported (raw torch dialect)."""

    raw_ir: str
    out_spec: Any  # pytree spec of the user outputs
    notes: list[str] = field(default_factory=list)  # capture fallbacks, dropped mutations
    # The captured (decomposed) ExportedProgram, to run natively; not sent between processes.
    exported: Any = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "exported": None}


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
    notes: list[str] = []
    snapshots.enter("capture")
    program = fx.capture(module, example_inputs, dynamic_dims, method, notes)
    snapshots.enter("import")
    raw = fx.import_program(program)
    if mutated := fx.mutated_inputs(program):
        notes.append(f"updated in place and not compared (as upstream): {', '.join(mutated)}")
    return FxImport(module_text(raw), program.call_spec.out_spec, notes, program)


def torch_backend_ir(
    raw_ir: str,
    backend_legal_ops: Sequence[str] = (),
    *,
    snapshots: Snapshots | None = None,
    pipeline: Sequence[str] | None = None,
) -> str:
    """Stage torch-backend: raw torch dialect -> the backend contract, by `pipeline`
    (default: the FX one keeping `backend_legal_ops` whole)."""
    try:
        raw = parse_module(raw_ir, new_context())
    except ir.MLIRError as error:  # the importer wrote IR that does not verify
        lines = str(error).splitlines()
        detail = next((line.strip() for line in lines if "error:" in line), first_line(error))
        raise StageError(
            "import", f"the imported module does not verify: {detail}", diagnostics=lines[1:], input_ir=raw_ir
        ) from None
    if pipeline is None:
        pipeline = pipelines.fx_to_torch_backend(backend_legal_ops)
    run_stage(raw, "torch-backend", pipeline, snapshots)
    return module_text(raw)


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


def compile_torch_backend_ir(
    torch_backend_ir: str,
    backend: str,
    *,
    snapshots: Snapshots | None = None,
    opt_level: int | None = None,
    executor: str = "refbackend",
):
    """torch backend IR -> backend IR -> the executor's program (RefBackend: linalg -> LLVM -> loaded).

    `opt_level` of the RefBackend's ExecutionEngine; None: `refbackend.opt_level_for` the program.
    With backend `torch` (`toolchain.TORCH_INPUT`) the executor is handed the IR as it is.
    """
    chain = toolchain(executor=executor, frontend="fx", backend=backend)  # raises on an unknown backend
    return compile_backend_ir(torch_backend_ir, chain, snapshots=snapshots, opt_level=opt_level)


def compile_backend_ir(
    torch_ir: str, chain: Toolchain, *, snapshots: Snapshots | None = None, opt_level: int | None = None
):
    """Stages `backend` (`chain.to_backend`) and `lower` (the chain's executor) of torch IR."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    dtypes = result_dtypes(torch_ir)
    module = parse_module(torch_ir, new_context())
    if chain.backend != TORCH_INPUT:
        run_stage(module, "backend", chain.to_backend, snapshots)
    level = opt_level_for(torch_ir) if opt_level is None else opt_level
    return chain.executor().program_for(module, dtypes, snapshots, opt_level=level)


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
