"""What a native crash leaves to tell it apart from another: its own stack, its assert's message.

A process that runs MLIR passes or compiled code through the Python bindings dies of a
fatal signal with only Python's frames to show (faulthandler): two aborts for different
reasons look alike. `report_native_crashes()`, called first thing in a process that may
crash so, makes each say which:

- LLVM's own handler prints the native stack on a fatal signal (`PrintStackTraceOnErrorSignal`,
  which the bindings' library exports but never calls; `torch-mlir-opt` calls it), named by
  `llvm-symbolizer` when it is on PATH;
- C's stdout is made unbuffered and sent to stderr: a failed `cf.assert` prints its message
  with `puts` and then aborts, and a buffered message dies with the process.

`crash_state(stderr)` reads both back: the assert's message and the innermost named frames.
Like the rest of the replay runtime it imports nothing from the project.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import sys

_enabled = False


def report_native_crashes(frames: bool = True) -> bool:
    """Make C's stdout reach stderr at once and, with `frames`, a fatal signal print the
    native stack. True when LLVM's handler is installed (the bindings' library is there).

    Naming the frames runs llvm-symbolizer over every library on the stack: a second for a
    pass, ten or more for compiled code that crashes under torch's and Python's frames (whose
    own frames have no name anyway). So the suite's hosts and an execute stage's replays
    keep the last words only; a compile stage's replay, where the frames say which pass and
    op crashed, names them."""
    global _enabled
    if _enabled:
        return True
    try:
        sys.stdout.flush()
        os.dup2(2, 1)  # puts() from compiled code: into the stderr the parent keeps
        libc = ctypes.CDLL(None)
        stdout = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.setvbuf(stdout, None, 2, 0)  # _IONBF
    except (OSError, ValueError, AttributeError):
        pass
    if not frames:
        return False
    # LLVM looks for llvm-symbolizer on PATH when it crashes: a test or a tool that narrows PATH
    # later would leave the frames unnamed. Named once, here.
    if "LLVM_SYMBOLIZER_PATH" not in os.environ:
        found = shutil.which("llvm-symbolizer") or next(
            iter(sorted(glob.glob("/usr/lib/llvm-*/bin/llvm-symbolizer"))), None
        )
        if found:
            os.environ["LLVM_SYMBOLIZER_PATH"] = found
    try:
        import torch_mlir._mlir_libs as libs

        library = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libTorchMLIRAggregateCAPI.so"))
        install = library._ZN4llvm3sys28PrintStackTraceOnErrorSignalENS_9StringRefEb
    except (ImportError, OSError, AttributeError):
        return False
    install.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool]
    install.restype = None
    argv0 = (sys.executable or "python").encode()
    install(argv0, len(argv0), False)
    _enabled = True
    return True


# A frame of LLVM's stack dump: ` #3 0x00007f... mlir::Foo::bar(int) const (/lib.so+0x2a)` or
# `... (anonymous namespace)::Pass::run() Pass.cpp:0:0`; unnamed: ` #2 0x7f... (/lib/libc.so.6+0x3c050)`.
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-fA-F]+ (?P<rest>.*)$")
_LOCATION = re.compile(r"\s+(?:\(\S+\+0x[0-9a-fA-F]+\)|\S+:\d+:\d+)$")
# Frames that are the crash's reporting, not its place. Only C++ frames count (`ns::name`):
# the C ones are libc's, the interpreter's and libffi's (the way into compiled code, whose own
# frames have no name), which differ between a pytest worker and a repro.py.
_NOT_THE_PLACE = re.compile(r"^(?:llvm::sys::|llvm::report_fatal_error|llvm::llvm_unreachable_internal)")


# Lines a Python process prints that are not a native crash's last words.
_PYTHON_TALK = re.compile(r"Warning:|^\s*File \"|^Traceback|^\s+warnings\.warn")
_BANNERS = ("PLEASE submit a bug report", "Stack dump:", "Fatal Python error:", "Current thread 0x")


def frame_name(text: str) -> str | None:
    """`mlir::torch::Torch::AtenAnyDimsOp::fold(mlir::...Adaptor<...>) (/x.so+0x1)` ->
    `mlir::torch::Torch::AtenAnyDimsOp::fold`: the function, without its parameters,
    qualifiers and location; None for an unnamed frame."""
    text = _LOCATION.sub("", text.strip()).replace("(anonymous namespace)::", "")
    if not text or text.startswith("("):
        return None
    depth = 0
    for i, char in enumerate(text):  # the parameter list: the first `(` outside a template's `<>`
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0:
            return text[:i].strip() or None
    return text.strip()


def native_frames(stderr: str, count: int = 3) -> list[str]:
    """The innermost `count` named frames of LLVM's stack dump in `stderr`, the handlers' own left out."""
    names = []
    for line in stderr.splitlines():
        match = _FRAME.match(line)
        if not match:
            continue
        name = frame_name(match["rest"])
        if name and "::" in name and not _NOT_THE_PLACE.match(name):
            names.append(name)
            if len(names) == count:
                break
    return names


def last_words(stderr: str) -> str | None:
    """The last line a process printed before the crash handlers' output (a failed
    `cf.assert`'s message), or None."""
    before = []
    for line in stderr.splitlines():
        if line.startswith(_BANNERS) or _FRAME.match(line):
            break
        if line.strip() and not _PYTHON_TALK.search(line):
            before.append(line.strip())
    return before[-1] if before else None
