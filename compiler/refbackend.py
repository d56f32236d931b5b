"""The reference backend: linalg-on-tensors -> LLVM -> MLIR's ExecutionEngine.

The lowering (stage `lower`) and the JIT opt level policy are here; the program
itself, its memref marshalling (`DTYPES`) and the bf16 boundary rewrite are in
`compiler.replay_runtime.engine`, which reproducer bundles carry.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from torch_mlir import ir

from compiler.pipelines import LINALG_TO_LLVM
from compiler.replay_runtime import matmul
from compiler.replay_runtime.engine import (  # noqa: F401 - re-exported: the backend's program and its dtypes
    DTYPES,
    ELEMENT_DTYPES,
    TORCH_DTYPE_OF_MLIR,
    ArgumentType,
    RefBackendProgram,
    ResultType,
    UnsupportedDType,
    argument_types,
    boundary_as_bits,
    from_storage_array,
    to_storage_array,
)
from compiler.stages import Snapshots, StageError, module_text, new_context, parse_module, run_stage, split_top_level

# --- compile and run ---------------------------------------------------------------

_TENSOR_SHAPE = re.compile(r"(?:!torch\.vtensor<\[([0-9,-]*)\]|tensor<((?:[0-9?]+x)+))")


def largest_tensor_elements(ir_text: str) -> int:
    """Elements of the largest statically shaped tensor type in the IR (0 if none)."""
    largest = 0
    for torch_dims, builtin_dims in _TENSOR_SHAPE.findall(ir_text):
        dims = torch_dims.split(",") if torch_dims else builtin_dims.rstrip("x").split("x")
        if dims == [""] or any(not d.isdigit() for d in dims):
            continue
        largest = max(largest, math.prod(int(d) for d in dims))
    return largest


# The JIT opt level policy, from benchmarks/opt_level.py on a sample of upstream's
# suite: a typical test's program JITs faster at O0 than at O2 (tens of ms, the bulk
# of its run) and its small tensors run in well under a millisecond at any level, so
# O0 it is. Programs over a tensor of a million elements or more are the exception:
# there O2 buys more than it costs (`MultinomialModule2D_basic`, 10M samples: run
# 0.53 s at O0, 0.32 s at O2, JIT about equal).
LARGE_TENSOR_ELEMENTS = 1 << 20


def opt_level_for(ir_text: str) -> int:
    """The ExecutionEngine opt level for a program, from its IR (see the policy above)."""
    return 2 if largest_tensor_elements(ir_text) >= LARGE_TENSOR_ELEMENTS else 0


LOWER_PIPELINE = ("func.func(convert-elementwise-to-linalg)",) + LINALG_TO_LLVM

# At O2 and above LLVM's loop vectorizer runs: there the loops of a matmul or a
# convolution are nested with the output's contiguous dim innermost, which it vectorizes
# (the same values, bit for bit: `passes.output_dim_innermost`). A 128x768 @ 768x768
# matmul at O2 ran 2-8x faster so (benchmarks/RESULTS.md); O0 code is not vectorized.
VECTORIZABLE_LOOPS = "python:compiler.replay_runtime.passes:output_dim_innermost"
VECTORIZING_OPT_LEVEL = 2
# At the same levels, each f32 matmul (batched too) becomes a packed, register-blocked
# kernel (`compiler.replay_runtime.matmul`): 1.5-8x the loops' speed, by target.
PACKED_MATMUL = matmul.PASS


def lower_pipeline(opt_level: int = 0) -> tuple[str, ...]:
    """The `lower` stage's passes after the backend's conversion to linalg, for a program JIT-compiled at `opt_level`."""
    if opt_level < VECTORIZING_OPT_LEVEL:
        return LOWER_PIPELINE
    at = LOWER_PIPELINE.index("func.func(linalg-fuse-elementwise-ops)") + 1
    loops = LOWER_PIPELINE.index("func.func(convert-linalg-to-loops)")
    return (
        *LOWER_PIPELINE[:at],
        VECTORIZABLE_LOOPS,
        *LOWER_PIPELINE[at:loops],
        PACKED_MATMUL,
        *LOWER_PIPELINE[loops:],
    )


def lower_to_llvm(
    module: ir.Module, snapshots: Snapshots | None = None, to_linalg: Sequence[str] = (), opt_level: int = 0
) -> ir.Module:
    """Backend IR -> (linalg-on-tensors via `to_linalg`) -> LLVM dialect: stage `lower`.
    Use the module returned: `module` changed in place, or the memo's (`run_stage`)."""
    boundary_as_bits(module)
    return run_stage(module, "lower", tuple(to_linalg) + lower_pipeline(opt_level), snapshots)


def compile_linalg(
    backend_module: ir.Module,
    result_dtypes: Sequence[ResultType],
    *,
    to_linalg: Sequence[str] = (),
    snapshots: Snapshots | None = None,
    opt_level: int = 0,
) -> RefBackendProgram:
    """Backend IR module -> callable program (stage `lower`, then the JIT).

    `to_linalg` is the backend's own conversion to linalg-on-tensors (TOSA,
    StableHLO); it runs as the first part of `lower`.
    """
    compiled_for = argument_types(backend_module)
    llvm_module = lower_to_llvm(backend_module, snapshots, to_linalg, opt_level)
    return _load(llvm_module, result_dtypes, opt_level, compiled_for)


@dataclass(frozen=True)
class LoweredProgram:
    """A program lowered to the LLVM dialect, as text, with what loading it takes: the JIT
    alone rebuilds it (`load`), in any process, without the pass pipelines. What a cache
    of compiled programs keeps (the eager config's ops, `compiler.frontends.eager_ops`)."""

    llvm_ir: str
    result_dtypes: tuple[ResultType, ...]
    argument_types: tuple[ArgumentType | None, ...] | None  # as compiled, from backend IR
    opt_level: int

    def load(self, context: ir.Context | None = None) -> RefBackendProgram:
        """The JIT-compiled program; a failure to load is the stage `lower`'s, as in `compile_linalg`.
        The text is parsed in `context` (default: a new one; a context is ~2 ms to make)."""
        module = parse_module(self.llvm_ir, context or new_context())
        return _load(module, self.result_dtypes, self.opt_level, self.argument_types)


def lower_linalg(
    backend_module: ir.Module,
    result_dtypes: Sequence[ResultType],
    *,
    to_linalg: Sequence[str] = (),
    snapshots: Snapshots | None = None,
    opt_level: int = 0,
) -> LoweredProgram:
    """`compile_linalg` up to the JIT: stage `lower`, the LLVM-dialect module kept as text."""
    compiled_for = argument_types(backend_module)
    llvm_module = lower_to_llvm(backend_module, snapshots, to_linalg, opt_level)
    kept_types = None if compiled_for is None else tuple(compiled_for)
    return LoweredProgram(module_text(llvm_module), tuple(result_dtypes), kept_types, opt_level)


def _load(
    llvm_module: ir.Module,
    result_dtypes: Sequence[ResultType],
    opt_level: int,
    compiled_for: Sequence[ArgumentType | None] | None,
) -> RefBackendProgram:
    try:
        return RefBackendProgram(llvm_module, result_dtypes, opt_level=opt_level, argument_types=compiled_for)
    except StageError:
        raise
    except Exception as error:
        raise StageError("lower", f"ExecutionEngine: {type(error).__name__}: {error}") from error


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


# --- several programs, one lowering and one JIT ------------------------------------------


@dataclass
class ToLower:
    """A program's backend module before the `lower` stage, with what its program needs
    besides: what `lower_linalg` is given, kept for `lower_together`."""

    module: ir.Module  # backend IR with one @main
    result_dtypes: tuple[ResultType, ...]
    to_linalg: tuple[str, ...] = ()
    opt_level: int = 0


_ENTRY = "lowered_together_{}"


def lower_together(
    programs: Sequence[ToLower], *, keep_text: bool = False
) -> tuple[list[RefBackendProgram], "LoweredBatch | None"]:
    """Stage `lower` and the JIT once for several programs: each @main becomes one function
    of a module (`lowered_together_<i>`), lowered by the same passes (the per-function
    ones run on each alone, as they would in a module of its own) and JIT-compiled as one.
    For a test's many small programs (the `eager` config's ops), most of the pass manager's
    and the JIT's cost is per run, not per function: `benchmarks/eager_compile.py`.

    The programs must share one context, one `to_linalg` and one opt level. Each comes back
    as its entry of the one engine, in order; with `keep_text`, the lowered module too, as
    a `LoweredBatch` that loads them all again in another process. Raises StageError
    (stage `lower`, the module's) when any function fails: the caller then lowers the
    programs alone to learn which.
    """
    first = programs[0]
    context = first.module.context
    if any(p.module.context is not context or p.to_linalg != first.to_linalg for p in programs) or any(
        p.opt_level != first.opt_level for p in programs
    ):
        raise ValueError("lower_together: programs of one context, conversion to linalg and opt level")
    compiled_for = [argument_types(p.module) for p in programs]
    merged = parse_module("module {}", context)
    with context:
        for index, program in enumerate(programs):
            boundary_as_bits(program.module)
            for op in list(program.module.body.operations):
                if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == "main":
                    op.attributes["sym_name"] = ir.StringAttr.get(f"lowered_together_{index}")
                op.detach_from_parent()
                merged.body.append(op)
    merged = run_stage(merged, "lower", tuple(first.to_linalg) + lower_pipeline(first.opt_level), Snapshots())
    entries = tuple(
        (f"lowered_together_{i}", tuple(p.result_dtypes), None if types is None else tuple(types))
        for i, (p, types) in enumerate(zip(programs, compiled_for))
    )
    batch = LoweredBatch(module_text(merged), entries, first.opt_level) if keep_text else None
    return _load_entries(merged, entries, first.opt_level), batch


@dataclass(frozen=True)
class LoweredBatch:
    """Programs lowered together (`lower_together`), as text: the JIT alone loads them all
    again, as the entries of one engine (`load`)."""

    llvm_ir: str
    # (entry, result dtypes, argument types as compiled) per program
    entries: tuple[tuple[str, tuple[ResultType, ...], tuple[ArgumentType | None, ...] | None], ...]
    opt_level: int

    def load(self, context: ir.Context | None = None) -> dict[str, RefBackendProgram]:
        """Each entry's program, JIT-compiled together; a failure is the stage `lower`'s."""
        module = parse_module(self.llvm_ir, context or new_context())
        return dict(zip((entry for entry, _, _ in self.entries), _load_entries(module, self.entries, self.opt_level)))


def _load_entries(llvm_module: ir.Module, entries, opt_level: int) -> list[RefBackendProgram]:
    try:
        return RefBackendProgram.sharing_one_engine(llvm_module, entries, opt_level=opt_level)
    except StageError:
        raise
    except Exception as error:
        raise StageError("lower", f"ExecutionEngine: {type(error).__name__}: {error}") from error
