"""Run a function in a forked child, so a crash or hang in native code is survived.

The child inherits the parent's memory (the module, the golden trace, the shared
torch-backend IR) for free, returns its value pickled through a pipe, and exits, which
also frees every ExecutionEngine it created: memory stays flat over long runs. The
child's stderr goes to a file whose tail is kept when it crashes (LLVM assertions and
"Segmentation fault" messages land there).
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Crashed:
    reason: str  # "killed by SIGSEGV", "exited with status 3"
    stderr_tail: str


@dataclass
class TimedOut:
    seconds: float
    stderr_tail: str


@dataclass
class Raised:
    """The function raised in the child; the traceback text and the exception, if picklable."""

    exception: BaseException | None
    traceback: str


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


def run_forked(fn: Callable[[], Any], timeout: float) -> Any | Crashed | TimedOut | Raised:
    """`fn()` in a forked child; its return value, or how the child ended."""
    read_fd, write_fd = os.pipe()
    stderr_file = tempfile.NamedTemporaryFile(prefix="e2e-child-", suffix=".stderr", delete=False)
    stderr_file.close()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        status = 0
        try:
            fd = os.open(stderr_file.name, os.O_WRONLY)
            os.dup2(fd, 2)
            faulthandler.enable()  # a crash's Python stack goes to the kept stderr tail
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # never pytest-timeout's handler
            try:
                payload = pickle.dumps(("ok", fn()))
            except BaseException as error:  # noqa: BLE001 - everything is reported
                text = traceback.format_exc()
                try:
                    payload = pickle.dumps(("raised", Raised(error, text)))
                except Exception:
                    payload = pickle.dumps(("raised", Raised(None, text)))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            status = 70
        finally:
            os._exit(status)

    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pid = 0
                return TimedOut(timeout, _tail(stderr_file.name))
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        pid = 0
        if chunks:
            kind, value = pickle.loads(b"".join(chunks))
            return value
        if os.WIFSIGNALED(status):
            reason = f"killed by {_signal_name(os.WTERMSIG(status))}"
        else:
            reason = f"exited with status {os.WEXITSTATUS(status)} before returning a result"
        return Crashed(reason, _tail(stderr_file.name))
    finally:
        if pid:  # interrupted (e.g. by pytest-timeout): never leave the child behind
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(read_fd)
        os.unlink(stderr_file.name)
