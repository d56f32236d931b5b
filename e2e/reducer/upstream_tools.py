"""The upstream tools a bundle's command may need, and reading what they print.

Which binary (`torch-mlir-opt` from the torch-mlir wheel, `mlir-opt` from an LLVM build,
`iree-compile` from IREE's wheel), whether a tool takes a pipeline entry (asked of the tool,
not listed: its pipeline parser refuses a pass or option it lacks), and a dying tool's
signal and innermost frames, from LLVM's symbolized stack dump.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from compiler.pipelines import as_text

MLIR_OPT_SOURCE = "an LLVM build at torch-mlir's LLVM commit"
FRAMES = 5  # a crash's innermost frames kept


def torch_mlir_opt() -> str | None:
    """The torch-mlir wheel's `torch-mlir-opt` binary, else the one on PATH. The console
    script on PATH starts Python to start that binary (0.2 s of its 0.4)."""
    return _wheel_binary("torch_mlir", "_mlir_libs/torch-mlir-opt") or shutil.which("torch-mlir-opt")


def iree_compile() -> str | None:
    return _wheel_binary("iree.compiler", "_mlir_libs/iree-compile") or shutil.which("iree-compile")


def _wheel_binary(package: str, relative: str) -> str | None:
    try:
        spec = importlib.util.find_spec(package)
    except ImportError:
        return None
    for root in (spec.submodule_search_locations or ()) if spec is not None else ():
        binary = Path(root) / relative
        if os.access(binary, os.X_OK):
            return str(binary)
    return None


@dataclass(frozen=True)
class Tool:
    name: str
    find: Callable[[], str | None]  # the binary, None when not installed
    source: str  # where it comes from ("the torch-mlir wheel")
    runs_passes: bool = True  # an opt tool (`--pass-pipeline`), else a compiler (its flags, `-o`)


TOOLS = {
    "torch-mlir-opt": Tool("torch-mlir-opt", torch_mlir_opt, "the torch-mlir wheel"),
    "mlir-opt": Tool("mlir-opt", lambda: shutil.which("mlir-opt"), MLIR_OPT_SOURCE),
    "iree-compile": Tool("iree-compile", iree_compile, "the iree-base-compiler wheel", runs_passes=False),
}
OPT_TOOLS = ("torch-mlir-opt", "mlir-opt")  # for MLIR pass entries, the first that takes the entry


@functools.cache
def takes(tool: str, entry: str) -> bool:
    """Whether `tool` takes the pipeline entry (registers its passes and options). An
    upstream MLIR tool that is not installed is taken to: it is the last resort."""
    binary = TOOLS[tool].find()
    if binary is None:
        return tool == OPT_TOOLS[-1]
    try:
        done = subprocess.run(
            [binary, f"--pass-pipeline={as_text([entry])}", "-o", os.devnull, "-"],
            input="module {}\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return False
    # Not whether it passes on an empty module (a backend contract's check may fail on one):
    # whether its pipeline parser took the entry.
    return not any(marker in done.stderr for marker in _REFUSED)


_REFUSED = ("PassPipeline Parser", "Pass-Options-Parser", "failed to add")


def opt_tool(entry: str) -> str:
    return next((tool for tool in OPT_TOOLS if takes(tool, entry)), OPT_TOOLS[-1])


def signal_name(status: int) -> str | None:
    """`SIGSEGV` for a status that says death by that signal (negative, or a shell's 128 + N), else None."""
    number = -status if status < 0 else status - 128 if status > 128 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# LLVM's stack dump: "Stack dump:", "0.\tProgram arguments: ...", " #3 0x... name (binary+0x..)"
_STACK_LINE = re.compile(r"^(Stack dump:|\d+\.\t|\s*#\d+ 0x|PLEASE submit a bug report)")
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ (.+?)(?: \([^()]*\+0x[0-9a-f]+\)| \S+:\d+:\d+)?$")
_NOT_OURS = ("llvm::sys::", "SignalHandler", "__libc_", "_start", "(")


def stderr_lines(stderr: str) -> list[str]:
    """A tool's stderr without LLVM's stack dump (its frames: `crash_frames`)."""
    return [line for line in stderr.splitlines() if line.strip() and not _STACK_LINE.match(line)]


def crash_frames(stderr: str, count: int = FRAMES) -> tuple[str, ...]:
    """The innermost frames of a symbolized LLVM stack dump, as function names (the signal
    handler's and libc's left out; argument lists dropped)."""
    frames = []
    for line in stderr.splitlines():
        match = _FRAME.match(line)
        if match is None or match[1].startswith(_NOT_OURS) or match[1].startswith("0x"):
            continue
        frames.append(_function(match[1]))
        if len(frames) == count:
            break
    return tuple(frames)


def _function(symbol: str) -> str:
    """`ns::Op::fold(Adaptor<...>) const` -> `ns::Op::fold`."""
    depth, out = 0, []
    for i, char in enumerate(symbol):
        if char == "(" and depth == 0 and not symbol.startswith("anonymous namespace)", i + 1):
            break
        depth += {"<": 1, ">": -1}.get(char, 0)
        out.append(char)
    return "".join(out).strip()
