"""A config's compiler as data: its frontend and, per stage, the passes from that stage's
input IR down to LLVM. This is what replaying a failure needs: the reducer reruns a
stage's saved input through `stages[stage]` without knowing how the config is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import pipelines
from compiler.refbackend import LOWER_PIPELINE

# The reference backend's boundary rewrite, as a pass entry (`lower_to_llvm` runs it first).
BF16_BOUNDARY = "python:compiler.refbackend:bf16_boundary_as_i16"

# frontend -> the pipeline from its imported IR to the torch backend contract
TO_TORCH_BACKEND = {
    "fx": pipelines.FX_TO_TORCH_BACKEND,
    "eager": pipelines.FX_TO_TORCH_BACKEND,  # each op is imported with the FX importer
    "ltc": pipelines.JIT_TO_TORCH_BACKEND,
    "torchscript": pipelines.JIT_TO_TORCH_BACKEND,
    "onnx": pipelines.ONNX_TO_TORCH_BACKEND,
}


@dataclass(frozen=True)
class Toolchain:
    frontend: str  # a key of TO_TORCH_BACKEND
    backend: str  # a key of pipelines.BACKENDS
    stages: dict[str, tuple[str, ...]]  # stage -> passes from that stage's input to LLVM


def toolchain(frontend: str, backend: str) -> Toolchain:
    if frontend not in TO_TORCH_BACKEND:
        raise ValueError(f"unknown frontend {frontend!r}; known: {', '.join(TO_TORCH_BACKEND)}")
    if backend not in pipelines.BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(pipelines.BACKENDS)}")
    to_backend, to_linalg = pipelines.BACKENDS[backend]
    lower = (BF16_BOUNDARY, *to_linalg, *LOWER_PIPELINE)
    return Toolchain(
        frontend,
        backend,
        {
            "torch-backend": (*TO_TORCH_BACKEND[frontend], *to_backend, *lower),
            "backend": (*to_backend, *lower),
            "lower": lower,
        },
    )
