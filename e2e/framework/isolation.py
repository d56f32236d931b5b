"""Run user and compiler code in forked children, so no crash, hang or runaway
allocation can take the run down.

`Child` forks a process that serves requests (`serve(channel)`); the parent sends it
pickled messages and waits for each reply under `Limits`: a deadline and a memory cap
on what the child's resident set grows by during that request, polled while it works.
A child that dies, overstays its deadline (or deadlocks for good, which
`e2e.framework.deadlock` sees at once) or outgrows its cap is killed and reported as
`Crashed`, `TimedOut` or `OverMemory`, with the tail of its stderr (LLVM assertions,
"Segmentation fault" and faulthandler's Python stack land there). `run_forked` is the
one-shot form.

Children inherit the parent's memory (modules, golden traces, shared IR) for free, and
their exit frees every ExecutionEngine they created: memory stays flat over long runs.
Every child asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG), so a
killed run never leaves a spinning child behind; a child that is killed takes every
process it started with it (`kill_tree`: a hung `iree-compile` or `tosa-opt` is a
grandchild, which PR_SET_PDEATHSIG does not reach).
"""

from __future__ import annotations

import atexit
import ctypes
import faulthandler
import gc
import os
import pickle
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from compiler.replay_runtime.crash import report_native_crashes
from e2e.framework import hang_stack
from e2e.framework.deadlock import DeadlockWatch
from e2e.framework.hang_stack import HangStack

# torch 2.13 warns that `isinstance(treespec, LeafSpec)` is deprecated whenever a leaf spec
# is made by copy or unpickling: torch.export deep-copies its specs, and replies and cached
# captures carry them. Torch's own class, not a check of ours; without this every host and
# worker prints it once (hosts are forked from a process that imported this module).
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)

MIB = 1 << 20
DEFAULT_MEMORY_CAP_GIB = 6.0  # two workers x (host + child) stay well inside 24 GiB
GIB = 1 << 30
DEFAULT_MEMORY_BYTES = int(DEFAULT_MEMORY_CAP_GIB * GIB)
_POLL_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    """What one request may take: wall seconds, and the resident memory the child may add
    to what it inherited from its parent (None: unbounded)."""

    seconds: float
    memory_bytes: int | None = None

    def describe_memory(self) -> str:
        return "unbounded" if self.memory_bytes is None else f"{self.memory_bytes / GIB:.1f} GiB"


@dataclass
class Crashed:
    reason: str  # "killed by SIGSEGV", "exited with status 3"
    stderr_tail: str
    peak_rss: int = 0


@dataclass
class TimedOut:
    seconds: float
    stderr_tail: str
    peak_rss: int = 0
    deadlock: str | None = None  # ended before the deadline: what it was stuck in (`e2e.framework.deadlock`)
    stack: HangStack | None = None  # what it was doing when killed (`request(diagnose=True)`)


@dataclass
class OverMemory:
    limit: int
    peak_rss: int
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


def _tail(fd: int, limit: int = 64000) -> str:
    """The last `limit` bytes written to a file, read through its descriptor."""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode(errors="replace").strip()
    except OSError:
        return ""


def rss_bytes(pid: int) -> int:
    """Resident set size of a live process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _live_parents() -> dict[int, int]:
    """pid -> ppid of every live process (Linux; empty elsewhere)."""
    parents = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            # The fields after the command's closing parenthesis: state, ppid, ...
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    return parents


def child_pids(parent: int) -> list[int]:
    """The live child processes of `parent` (Linux; empty elsewhere)."""
    return [pid for pid, ppid in _live_parents().items() if ppid == parent]


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, nearest first (Linux; empty elsewhere)."""
    parents, found, frontier = _live_parents(), [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every live process below it. The root is stopped first, so it
    starts no more; its descendants are found before anything dies (once the root is
    gone, they would belong to init)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    parents, tree, frontier = _live_parents(), [], [pid]
    while frontier:
        tree.extend(frontier)
        frontier = [child for child, parent in parents.items() if parent in frontier]
    for member in tree:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_command(
    args: list[str],
    *,
    timeout: float,
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    cwd: Path | str | None = None,
    env=None,
) -> subprocess.CompletedProcess:
    """`subprocess.run(args, capture_output=True, text=True)` for a command that runs
    compiler or test code (a bundle's repro.py, a native reproducer, torch-mlir-opt): in a
    session of its own, each of its processes under RLIMIT_DATA `memory_bytes` (inherited by
    its children), and the whole session killed when it overstays `timeout` (then
    `subprocess.TimeoutExpired`) or when it ends. A timeout that killed only the direct child
    left torch-mlir-opt, started by a wrapper script, running as an orphan until it held
    23 GiB."""
    process = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    if memory_bytes:
        try:  # before it can have allocated much: the limit binds what it and its children map
            resource.prlimit(process.pid, resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
        except (OSError, ValueError):
            pass  # it already ended, or the limit is above the hard one
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(process.pid)
        process.communicate()
        raise
    finally:
        _kill_session(process.pid)  # what the command left running
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def _kill_session(leader: int) -> None:
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Channel:
    """Length-prefixed pickles over a pair of pipe fds."""

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, message: Any) -> None:
        try:
            payload = pickle.dumps(message)
        except Exception:  # an unpicklable reply is reported, not lost
            payload = pickle.dumps(("raised", Raised(None, traceback.format_exc())))
        data = struct.pack("<Q", len(payload)) + payload
        view = memoryview(data)
        while view:
            written = os.write(self.write_fd, view)
            view = view[written:]

    def receive(self) -> Any:
        """Block until one whole message arrives (child side)."""
        header = self._read_exactly(8)
        if header is None:
            raise EOFError
        body = self._read_exactly(struct.unpack("<Q", header)[0])
        if body is None:
            raise EOFError
        return pickle.loads(body)

    def waiting(self) -> bool:
        """Whether a message (or the end of the channel) waits to be received, without blocking."""
        return bool(select.select([self.read_fd], [], [], 0)[0])

    def _read_exactly(self, size: int) -> bytes | None:
        chunks, left = [], size
        while left:
            chunk = os.read(self.read_fd, min(left, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class _Reaper:
    """Children that were told to exit and are reaped later, so that nobody waits for an
    exit: a forked child unmapping its copy of torch takes 10-30 ms, once per pair.

    One per process (pids are); a forked child starts with an empty one.
    """

    def __init__(self) -> None:
        self.pending: dict[int, float] = {}  # pid -> when it is killed if still running
        self.scratch: dict[int, str] = {}  # pid -> its temporary directory, removed once it is reaped

    def add(self, pid: int, grace: float, scratch: str) -> None:
        self.pending[pid] = time.monotonic() + grace
        self.scratch[pid] = scratch
        self.poll()

    def poll(self, *, wait: bool = False) -> None:
        """Reap the children that exited, kill those past their grace; with `wait`, until none is left."""
        for pid, deadline in list(self.pending.items()):
            while True:
                try:
                    exited = os.waitpid(pid, os.WNOHANG)[0] != 0
                except ChildProcessError:
                    exited = True
                if not exited and time.monotonic() > deadline:
                    try:
                        kill_tree(pid)
                        os.waitpid(pid, 0)
                    except (ProcessLookupError, ChildProcessError):
                        pass
                    exited = True
                if exited:
                    del self.pending[pid]
                    shutil.rmtree(self.scratch.pop(pid, ""), ignore_errors=True)
                    break
                if not wait:
                    break
                time.sleep(0.005)


_REAPER = _Reaper()
atexit.register(lambda: _REAPER.poll(wait=True))


def _no_progress_monitor() -> None:
    """Keep tqdm from starting its monitor thread (its first progress bar does; torch.export's
    capture makes one). With it, every process that captured is multi-threaded: the deadlock
    watch, which needs a single thread, can never fire in a test host, and a fork while that
    thread holds tqdm's lock leaves the child's copy held for good."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


_no_progress_monitor()


class Child:
    """A forked child running `serve(channel)`; `request` talks to it under limits."""

    def __init__(self, serve: Callable[[Channel], None], *, name: str = "child"):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # The child's stderr: a file with no name (unlinked from the start), so nothing is
        # left in the temporary directory however the run ends.
        self._stderr = tempfile.TemporaryFile(prefix=f"e2e-{name}-", suffix=".stderr")
        self.peak_rss = 0  # over the child's life
        self.request_peak_rss = 0  # during the last request
        # A forked child starts out sharing its parent's pages: the cap counts its growth.
        self.baseline_rss = rss_bytes(os.getpid())
        # The child's temporary directory, removed when it is reaped: what it leaves there
        # (an executor's working files, a tool's scratch) goes with it, even when it is
        # killed or its failed program's artifacts are never closed.
        self.scratch = tempfile.mkdtemp(prefix=f"e2e-{name}-")
        _REAPER.poll()
        self.pid = os.fork()
        if self.pid == 0:
            _REAPER.pending.clear()  # the parent's children, not this one's
            _REAPER.scratch.clear()
            os.environ["TMPDIR"] = tempfile.tempdir = self.scratch  # subprocesses' too
            os.close(to_child_w)
            os.close(from_child_r)
            status = 0
            try:
                # Everything inherited is long-lived: without this, each full collection
                # walks torch's ~360,000 objects (decompositions run 40% slower), and
                # touching their headers copies the shared pages.
                gc.freeze()
                _without_assertion_rewriting()
                die_with_parent()
                os.dup2(self._stderr.fileno(), 2)
                # Not pytest's captured sys.stderr: Python tracebacks and faulthandler's stack
                # of a crash go to fd 2, whose tail the parent keeps in the result.
                sys.stderr = open(2, "w", closefd=False, buffering=1)
                faulthandler.enable(file=sys.stderr)
                report_native_crashes(frames=False)  # an assert's message in that stderr, before its abort
                for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
                    signal.signal(number, signal.SIG_DFL)  # never the parent's handlers
                serve(Channel(to_child_r, from_child_w))
            except BaseException:  # noqa: BLE001 - the parent reports the exit status
                traceback.print_exc()
                status = 70
            finally:
                os._exit(status)
        os.close(to_child_r)
        os.close(from_child_w)
        self._channel = Channel(from_child_r, to_child_w)
        self._buffer = bytearray()  # grows in place: a `bytes` += copies it all, per 64 KiB pipe read

    @property
    def alive(self) -> bool:
        return self.pid != 0

    def request(self, message: Any, limits: Limits, *, diagnose: bool = False, gdb: bool = True) -> Any:
        """Send `message`; the child's reply, or how the child ended (it is then reaped).
        `diagnose`: a child that overstays or deadlocks is looked at before it is killed
        (`TimedOut.stack`, `e2e.framework.hang_stack`: a second, and gdb's time if on PATH
        and `gdb`)."""
        try:
            self._channel.send(message)
        except (BrokenPipeError, OSError):
            return self._ended(limits)
        return self.wait_reply(limits, diagnose=diagnose, gdb=gdb)

    def wait_reply(self, limits: Limits, *, diagnose: bool = False, gdb: bool = True) -> Any:
        """The reply to the request just sent. The memory cap counts what the child adds
        during this request: to its parent's pages at first, to what it holds later on."""
        deadline = time.monotonic() + limits.seconds
        baseline = max(self.baseline_rss, rss_bytes(self.pid))
        self.request_peak_rss = 0
        deadlock = DeadlockWatch(child_pids)
        while True:
            message = self._take_message()
            if message is not None:
                return message[0]
            remaining = deadline - time.monotonic()
            rss = rss_bytes(self.pid)
            self.peak_rss = max(self.peak_rss, rss)
            self.request_peak_rss = max(self.request_peak_rss, rss)
            if limits.memory_bytes is not None and rss - baseline > limits.memory_bytes:
                self.kill()
                return OverMemory(limits.memory_bytes, self.request_peak_rss, self._stderr_tail())
            stuck = None if remaining <= 0 else deadlock.check(self.pid)
            if remaining <= 0 or stuck is not None:
                stack = hang_stack.record(self.pid, descendants(self.pid), gdb=gdb) if diagnose else None
                self.kill()
                return TimedOut(limits.seconds, self._stderr_tail(), self.request_peak_rss, deadlock=stuck, stack=stack)
            ready, _, _ = select.select([self._channel.read_fd], [], [], min(remaining, _POLL_SECONDS))
            if ready:
                chunk = os.read(self._channel.read_fd, 1 << 20)
                if not chunk:
                    message = self._take_message()
                    return message[0] if message is not None else self._ended(limits)
                self._buffer += chunk

    def _take_message(self) -> tuple[Any] | None:
        if len(self._buffer) < 8:
            return None
        size = struct.unpack("<Q", self._buffer[:8])[0]
        if len(self._buffer) < 8 + size:
            return None
        body = memoryview(self._buffer)[8 : 8 + size]
        try:
            return (pickle.loads(body),)
        finally:
            body.release()  # a bytearray with a view on it cannot be resized
            del self._buffer[: 8 + size]

    def _ended(self, limits: Limits) -> Crashed | OverMemory:
        """The child closed its end without a reply: reap it and say how it ended."""
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        shutil.rmtree(self.scratch, ignore_errors=True)
        tail = self._stderr_tail()
        if os.WIFSIGNALED(status):
            reason = f"killed by {_signal_name(os.WTERMSIG(status))}"
        else:
            reason = f"exited with status {os.WEXITSTATUS(status)} before returning a result"
        if limits.memory_bytes is not None and _looks_out_of_memory(tail):
            return OverMemory(limits.memory_bytes, self.request_peak_rss, tail)
        return Crashed(reason, tail, self.request_peak_rss)

    def forget_output(self) -> None:
        """Start the child's stderr afresh, and its peak, for what it serves next (a host
        handed over to another test). The child writes through the same open file: its next
        write goes to the start."""
        if not self._stderr.closed:
            self._stderr.seek(0)
            self._stderr.truncate()
        self.peak_rss = 0

    def _stderr_tail(self) -> str:
        return "" if self._stderr.closed else _tail(self._stderr.fileno())

    def kill(self) -> None:
        if self.pid:
            try:
                kill_tree(self.pid)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0
            shutil.rmtree(self.scratch, ignore_errors=True)

    def close(self, grace: float = 5.0) -> None:
        """Ask the child to exit (its channel closes). It is reaped later, and killed if it
        is still running after `grace` seconds."""
        self._channel.close()
        if self.pid:
            _REAPER.add(self.pid, grace, self.scratch)
            self.pid = 0
        self._stderr.close()


def _without_assertion_rewriting() -> None:
    """A child imports suite files and libraries, never a pytest test module: pytest's
    assertion rewriting (inherited from a pytest process) would only parse and rewrite each
    module of every library that ships a pytest plugin (hypothesis: a hundred modules,
    0.4 s in a probe of the property files) instead of loading its bytecode, and with
    nowhere to keep the result where bytecode is not written (`PYTHONDONTWRITEBYTECODE`)."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "_pytest.assertion.rewrite"]


def _looks_out_of_memory(stderr_tail: str) -> bool:
    return any(word in stderr_tail for word in ("MemoryError", "std::bad_alloc", "out of memory", "Cannot allocate"))


def run_forked(fn: Callable[[], Any], timeout: float, memory_bytes: int | None = None) -> Any:
    """`fn()` in a forked child; its return value, or how the child ended
    (`Crashed`, `TimedOut`, `OverMemory`; `Raised` when `fn` raised)."""

    def serve(channel: Channel) -> None:
        channel.receive()
        channel.send(call_reporting(fn))

    child = Child(serve, name="run")
    try:
        return child.request("go", Limits(timeout, memory_bytes))
    finally:
        child.close()


def call_reporting(fn: Callable[[], Any]) -> Any:
    """`fn()`, or a `Raised` that carries what it raised (in a child, before replying)."""
    try:
        return fn()
    except BaseException as error:  # noqa: BLE001 - everything is reported
        text = traceback.format_exc()
        try:
            pickle.dumps(error)
            return Raised(error, text)
        except Exception:
            return Raised(None, text)
