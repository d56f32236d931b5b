"""Torch IR -> the backend contract -> a backend's IR -> an executor's program: the stages
every frontend shares after its own import (`torch-backend`, `backend`, `lower`).

    torch_backend_ir(raw_ir)                      # stage torch-backend
    compile_backend_ir(torch_ir, chain)           # stages backend and lower: the chain's executor's program
    lower_torch_backend_ir(torch_ir, "linalg", ...)  # the RefBackend's, up to its JIT: text to load
    compile_torch_backend_ir(torch_ir, "tosa")    # the same, for an FX config's chain
"""

from __future__ import annotations

from typing import Sequence

from torch_mlir import ir

from compiler import pipelines
from compiler.refbackend import LoweredProgram, ToLower, lower_linalg, opt_level_for, result_dtypes
from compiler.stages import (
    Snapshots,
    StageError,
    first_line,
    module_text,
    new_context,
    parse_module,
    run_stage,
)
from compiler.toolchain import TORCH_INPUT, Toolchain, toolchain


def torch_backend_ir(
    raw_ir: str,
    backend_legal_ops: Sequence[str] = (),
    *,
    snapshots: Snapshots | None = None,
    pipeline: Sequence[str] | None = None,
) -> str:
    """Stage torch-backend: raw torch dialect -> the backend contract, by `pipeline`
    (default: the FX one keeping `backend_legal_ops` whole)."""
    raw = parse_imported(raw_ir)
    if pipeline is None:
        pipeline = pipelines.fx_to_torch_backend(backend_legal_ops)
    return module_text(run_stage(raw, "torch-backend", pipeline, snapshots))


def parse_imported(raw_ir: str) -> ir.Module:
    """The importer's raw torch IR, parsed; StageError("import") naming the first error
    when it does not verify (the importer wrote invalid IR)."""
    try:
        return parse_module(raw_ir, new_context())
    except ir.MLIRError as error:
        lines = str(error).splitlines()
        detail = next((line.strip() for line in lines if "error:" in line), first_line(error))
        raise StageError(
            "import", f"the imported module does not verify: {detail}", diagnostics=lines[1:], input_ir=raw_ir
        ) from None


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
    module, dtypes = _backend_module(torch_ir, chain, snapshots)
    level = opt_level_for(torch_ir) if opt_level is None else opt_level
    return chain.executor.program_for(module, dtypes, snapshots, opt_level=level)


def lower_torch_backend_ir(
    torch_backend_ir: str,
    backend: str,
    *,
    snapshots: Snapshots,
    opt_level: int | None,
    context: ir.Context | None = None,
) -> LoweredProgram:
    """`compile_torch_backend_ir` on the RefBackend up to its JIT: the lowered program as text,
    which `LoweredProgram.load` JIT-compiles (here or in a later process). The IR is parsed
    in `context` (default: a new one)."""
    staged = stage_torch_backend_ir(
        torch_backend_ir, backend, snapshots=snapshots, opt_level=opt_level, context=context
    )
    return lower_linalg(
        staged.module, staged.result_dtypes, to_linalg=staged.to_linalg, snapshots=snapshots, opt_level=staged.opt_level
    )


def stage_torch_backend_ir(
    torch_backend_ir: str,
    backend: str,
    *,
    snapshots: Snapshots,
    opt_level: int | None,
    context: ir.Context | None = None,
) -> ToLower:
    """Stage `backend` of torch backend IR for the RefBackend: what its `lower` stage is
    given, alone (`lower_linalg`) or with other programs (`refbackend.lower_together`)."""
    chain = toolchain(executor="refbackend", frontend="fx", backend=backend)
    module, dtypes = _backend_module(torch_backend_ir, chain, snapshots, context)
    level = opt_level_for(torch_backend_ir) if opt_level is None else opt_level
    return ToLower(module, tuple(dtypes), tuple(pipelines.BACKENDS[backend][1]), level)


def _backend_module(
    torch_ir: str, chain: Toolchain, snapshots: Snapshots, context: ir.Context | None = None
) -> tuple[ir.Module, list]:
    """Stage `backend`: torch IR parsed and converted by `chain.to_backend`; @main's result dtypes.

    A chain that takes torch IR as it is (`TORCH_INPUT`) is given the importer's raw IR:
    it is verified first, as the torch-backend stage would, so IR the importer wrote
    invalid is blamed on the import (printed in generic form, it has no @main to read)."""
    if chain.backend == TORCH_INPUT:
        module = parse_imported(torch_ir)  # verified before @main's signature is read
        return module, result_dtypes(torch_ir)
    module = parse_module(torch_ir, context or new_context())
    dtypes = result_dtypes(torch_ir)
    return run_stage(module, "backend", chain.to_backend, snapshots), dtypes
