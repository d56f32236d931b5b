"""The JIT's code generation level: O0's code generator for a program JIT-compiled at O0.

MLIR's C API (`mlirExecutionEngineCreate`) builds the engine's TargetMachine at LLVM's
default code generation level and hands it to the engine, whose compiler uses it as it is
(`ExecutionEngine::create` sets `jitCodeGenOptLevel` on a TargetMachine builder it then
does not use), so `ExecutionEngine(opt_level=0)` sets the level of the LLVM IR passes alone: instruction selection, register allocation and
loop strength reduction still run as at O2 (SelectionDAG, the greedy allocator, LSR: a
profile of a small program's JIT here). LLVM's command-line options are the one handle on
code generation the bindings leave, and they reach every engine of the process; so
`codegen_level(opt_level)` sets O0's choices (`O0_CODEGEN`) around the compilation of a
program at O0 and gives back the default level's (`DEFAULT_CODEGEN`) around one at O2.
The code differs in speed, not in what it computes: these choices keep LLVM IR's
semantics, and the target's CPU and features (`target.pin`) are the same either way.

Through the C API (`LLVMParseCommandLineOptions`) LLVM's parser skips an option it does
not know, or a value it cannot read, and keeps the others: a torch-mlir whose LLVM lacks one
of them compiles as before in that respect.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from pathlib import Path
from typing import Iterator

# What a TargetMachine at CodeGenOptLevel::None chooses, and the same options' values at the
# default level (each, at that level, what LLVM does when the option is not given).
O0_CODEGEN = (
    "-fast-isel",
    "-optimize-regalloc=false",
    "-disable-lsr",
    "-disable-cgp",
    "-disable-machine-licm",
    "-disable-machine-cse",
    "-disable-machine-sink",
    "-disable-block-placement",
)
DEFAULT_CODEGEN = (
    "-fast-isel=false",
    "-optimize-regalloc=true",
    "-disable-lsr=false",
    "-disable-cgp=false",
    "-disable-machine-licm=false",
    "-disable-machine-cse=false",
    "-disable-machine-sink=false",
    "-disable-block-placement=false",
)

_level: int | None = None  # the level whose options are set (None: LLVM's own, none given)


@contextlib.contextmanager
def codegen_level(opt_level: int) -> Iterator[None]:
    """Compile at `opt_level`'s code generation inside the block (engines JIT-compile at
    their first lookup: create and look up inside it); the level before is set back after
    (the default level's, what LLVM does with no option given, after the outermost)."""
    previous = _level
    _set(opt_level)
    try:
        yield
    finally:
        _set(previous if previous is not None else 2)


def current_level() -> int | None:
    """The level whose code generation options are set (None: none set yet)."""
    return _level


def _set(opt_level: int) -> None:
    global _level
    wanted = 0 if opt_level == 0 else 2  # O1 and O3 too: the default level, as MLIR gives every engine
    if wanted == _level:
        return
    try:
        library = _library()
    except (OSError, AttributeError):  # not this torch-mlir's: its engines compile as before
        return
    options = O0_CODEGEN if wanted == 0 else DEFAULT_CODEGEN
    argv = (ctypes.c_char_p * (len(options) + 1))(b"e2e", *(option.encode() for option in options))
    library.LLVMParseCommandLineOptions(len(options) + 1, argv, None)
    _level = wanted


@functools.cache
def _library() -> ctypes.CDLL:
    import torch_mlir._mlir_libs as libs

    library = ctypes.CDLL(str(Path(libs.__file__).parent / "libTorchMLIRAggregateCAPI.so"))
    library.LLVMParseCommandLineOptions.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p]
    library.LLVMParseCommandLineOptions.restype = None
    return library
