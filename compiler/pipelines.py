"""Every pass pipeline the compiler runs, as data.

A pipeline is a list of pass entries, each a string the MLIR pass parser accepts at
module level. `as_text` wraps one in `builtin.module(...)`; the stage runner can run
the list whole or one entry at a time, which is how failures are localized.
"""

from __future__ import annotations

from typing import Sequence

from compiler.replay_runtime.pipeline import as_text  # noqa: F401 - re-exported

Pipeline = tuple[str, ...]


# FX (torch.export) import -> torch backend contract.
FX_TO_TORCH_BACKEND: Pipeline = (
    "func.func(torch-match-quantized-custom-ops)",
    "torchdynamo-export-to-torch-backend-pipeline{extra-library=}",
)

# Ops the torch-backend lowering keeps whole (does not decompose) for one backend, as
# upstream's FX configs do: linalg lowers adaptive_max_pool2d itself, while its
# decomposition (max_pool2d with indices) does not legalize.
BACKEND_LEGAL_OPS: dict[str, tuple[str, ...]] = {
    "linalg": ("aten.adaptive_max_pool2d",),
}


def fx_to_torch_backend(backend_legal_ops: Sequence[str] = ()) -> Pipeline:
    """`FX_TO_TORCH_BACKEND`, keeping `backend_legal_ops` whole."""
    if not backend_legal_ops:
        return FX_TO_TORCH_BACKEND
    legal = ",".join(backend_legal_ops)
    return (
        FX_TO_TORCH_BACKEND[0],
        f"torchdynamo-export-to-torch-backend-pipeline{{backend-legal-ops={legal} extra-library=}}",
    )


# TorchScript / JIT IR import (LTC, torchscript) -> torch backend contract.
JIT_TO_TORCH_BACKEND: Pipeline = ("torch-function-to-torch-backend-pipeline{extra-library=}",)

# ONNX import (onnx_importer: `torch.operator "onnx.*"` ops) -> torch backend contract, as
# upstream's ONNX config runs it: `convert-torch-onnx-to-torch` first, then the torch
# simplifications; linalg lowers the ops kept whole itself.
ONNX_BACKEND_LEGAL_OPS: tuple[str, ...] = ("aten.flatten.using_ints", "aten.adaptive_avg_pool1d", "aten.unflatten.int")
ONNX_TO_TORCH_BACKEND: Pipeline = (
    f"torch-onnx-to-torch-backend-pipeline{{backend-legal-ops={','.join(ONNX_BACKEND_LEGAL_OPS)}}}",
)

TORCH_BACKEND_TO_LINALG: Pipeline = ("torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=true}",)
TORCH_BACKEND_TO_TOSA: Pipeline = ("torch-backend-to-tosa-backend-pipeline",)
TORCH_BACKEND_TO_STABLEHLO: Pipeline = ("torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true}",)

# Backend IR -> linalg-on-tensors, the input of the reference backend.
# The conversions alone, as upstream's TOSA config runs them: `tosa-to-linalg-pipeline`
# also validates against the TOSA 1.0 level, which rejects every dynamic dim.
TOSA_TO_LINALG: Pipeline = (
    # tosa.const -> arith first: tosa-to-linalg does not take them.
    "func.func(tosa-to-arith)",
    "func.func(tosa-to-scf)",
    # transpose_conv2d has no linalg lowering of its own: decomposed to conv2d.
    "func.func(tosa-optional-decompositions)",
    "func.func(tosa-to-linalg-named)",
    "func.func(canonicalize)",
    "func.func(tosa-to-linalg)",
    "func.func(tosa-to-tensor)",
    "func.func(tosa-to-arith)",
)
STABLEHLO_TO_LINALG: Pipeline = (
    "func.func(stablehlo-aggressive-simplification)",
    "stablehlo-legalize-to-linalg",
    # Unsigned and bool element types -> signless, as the linalg-to-LLVM passes expect.
    "stablehlo-convert-to-signless",
    "canonicalize",
)

# linalg-on-tensors -> LLVM dialect, ready for the ExecutionEngine.
LINALG_TO_LLVM: Pipeline = (
    "func.func(linalg-generalize-named-ops)",
    "func.func(linalg-fuse-elementwise-ops)",
    "convert-shape-to-std",
    # Analysis-based bufferization (in place where that is safe) before the
    # copy-before-write one below, as upstream's RefBackend runs it: the sparsifier's
    # pipeline bufferizes dense code too. With copy-before-write alone, a loop that
    # inserts into a tensor copies the whole tensor per iteration (O(n^2):
    # `MultinomialModule_basic` ran past 270 s; now well under a second).
    "sparse-assembler{direct-out}",
    "sparsification-and-bufferization",
    "sparse-storage-specifier-to-llvm",
    "func.func(expand-realloc)",
    "func.func(refback-generalize-tensor-pad)",
    "func.func(refback-generalize-tensor-concat)",
    "func.func(tm-tensor-bufferize)",
    "one-shot-bufferize{copy-before-write bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}",
    "refback-mlprogram-bufferize",
    # Module level: lowering a multi-buffer `bufferization.dealloc` inserts a helper function.
    "buffer-deallocation-pipeline",
    "inline",
    "refback-munge-calling-conventions",
    "func.func(tm-tensor-to-loops)",
    "func.func(refback-munge-memref-copy)",
    "func.func(convert-linalg-to-loops)",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    # 16-bit floats are computed in f32 and rounded back after every op, explicitly, so
    # no lowering below depends on the host CPU (F16C, AVX512-FP16/BF16) or calls a
    # compiler-rt function the JIT cannot find (`__truncsfbf2`: every bf16 program
    # failed to load on CPUs without AVX512-BF16). bf16 <-> f32 then become integer code;
    # f16 <-> f32 are native or calls into `compiler.replay_runtime.softfloat`, the same bits either way.
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16,f16,"
    "f8E4M3FN,f8E4M3FNUZ,f8E5M2,f8E5M2FNUZ target-type=f32})",
    # LLVM has no float8 types: their conversions become calls of our own (`float8`).
    "python:compiler.replay_runtime.float8:expand_conversions",
    "func.func(refback-expand-ops-for-llvm)",
    "func.func(arith-expand{include-bf16=true})",
    "func.func(convert-math-to-llvm)",
    "convert-math-to-libm",
    "expand-strided-metadata",
    "finalize-memref-to-llvm",
    "lower-affine",
    "convert-bufferization-to-memref",
    "finalize-memref-to-llvm",
    "func.func(convert-arith-to-llvm)",
    "convert-vector-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "convert-complex-to-llvm",
    "reconcile-unrealized-casts",
)


# backend name -> (torch backend -> backend IR, backend IR -> linalg)
BACKENDS: dict[str, tuple[Pipeline, Pipeline]] = {
    "linalg": (TORCH_BACKEND_TO_LINALG, ()),
    "tosa": (TORCH_BACKEND_TO_TOSA, TOSA_TO_LINALG),
    "stablehlo": (TORCH_BACKEND_TO_STABLEHLO, STABLEHLO_TO_LINALG),
}
