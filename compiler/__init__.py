"""The bundled PyTorch -> MLIR compiler and its reference backend.

    from compiler import compile_module
    compiled = compile_module(model, (x,), backend="tosa")
    compiled(x)                           # runs on MLIR's ExecutionEngine
    compiled.snapshots.texts["backend"]   # the IR each stage was given

A library: it knows nothing of tests. The FX path is `compiler.fx_compile`, the JIT
frontends' `compiler.jit_compile`, ONNX's `compiler.onnx_compile`; the stages they share
after their import are `compiler.backend_compile`.
"""

from compiler.fx_compile import CompiledModule, compile_module
from compiler.stages import Snapshots, StageError

__all__ = ["CompiledModule", "Snapshots", "StageError", "compile_module"]
