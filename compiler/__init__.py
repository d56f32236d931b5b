"""The bundled PyTorch -> MLIR compiler and its reference backend.

    from compiler import compile_module
    compiled = compile_module(model, (x,), backend="tosa")
    compiled(x)                           # runs on MLIR's ExecutionEngine
    compiled.snapshots.texts["backend"]   # the IR each stage was given

A library: it knows nothing of tests. Each frontend is a module of `compiler.frontends` (its
capture, import and `Frontend` object); the stages they share after their import are
`compiler.backend_compile`; `compiler.compiled_module` compiles a module in one call.

The names below are imported when first used (PEP 562), so that a module of the package that
needs neither torch nor MLIR (the replay runtime's signatures) imports neither.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for readers and tools that read imports
    from compiler.compiled_module import CompiledModule, compile_module  # noqa: F401
    from compiler.stages import Snapshots, StageError  # noqa: F401

_NAMES = {
    "CompiledModule": "compiled_module",
    "compile_module": "compiled_module",
    "Snapshots": "stages",
    "StageError": "stages",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    return getattr(importlib.import_module(f"compiler.{_NAMES[name]}"), name)
