"""What a process that overstayed its deadline was doing, read from outside it before
it is killed: its threads' states and syscalls from /proc, the CPU each spent over the
last second (spinning or sleeping), and, when `gdb` is on PATH, a native backtrace of
every thread (with the Python frames, where the interpreter's gdb extension loads).

Nothing runs inside the process: a signal handler (faulthandler on SIGUSR1) would
interrupt the very sleep or wait it hangs in and move the stage it is reported in;
gdb attaches through ptrace and detaches again. Every part is optional: a fact /proc
does not give, or a gdb that is missing, slow or refused, costs its lines, never the
report (Linux; elsewhere only the gdb part can say anything).

    stack = record(pid)     # a HangStack: `summary` for the error, `text` for a file
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLE_SECONDS = 1.0  # how long the threads' CPU time is watched
GDB_SECONDS = 20.0  # gdb reads libtorch's symbols first: 10-15 s on a loaded 2-core machine
FILE_NAME = "hang-stack.txt"  # beside a pair's IR (`e2e.framework.runner`)
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class HangStack:
    """What a stuck process was doing: one line for a person, and every fact for a file."""

    summary: str
    text: str


def record(
    pid: int,
    descendants: list[int] = (),
    *,
    sample_seconds: float = SAMPLE_SECONDS,
    gdb_seconds: float = GDB_SECONDS,
    gdb: bool = True,
) -> HangStack:
    """The threads of `pid` and of its `descendants` (`isolation.descendants`) as /proc
    shows them, watched for `sample_seconds`; then gdb's backtrace of every thread of `pid`,
    if gdb is on PATH and `gdb` (a rerun's hang has its first attempt's backtrace)."""
    tree = [pid, *descendants]
    before = {member: _thread_ticks(member) for member in tree}
    time.sleep(sample_seconds)
    after = {member: _thread_ticks(member) for member in tree}
    lines, summary = [], ""
    for member in tree:
        threads = _threads(member, before[member], after[member], sample_seconds)
        if member == pid:
            summary = _summary(threads, sample_seconds)
            lines.append(f"process {pid}: {summary}")
        else:
            lines.append(f"child process {member}: {_cmdline(member)}: {_summary(threads, sample_seconds)}")
        lines += [f"  {thread.line()}" for thread in threads]
    if len(tree) > 1:
        summary += f"; {len(tree) - 1} child process(es) (see the file)"
    lines += [
        "",
        *(_gdb_backtrace(pid, gdb_seconds) if gdb else ["gdb: not run (the caller has a backtrace of this hang)"]),
    ]
    return HangStack(summary, "\n".join(lines) + "\n")


@dataclass
class _Thread:
    tid: int
    name: str
    state: str  # R running, S sleeping, D uninterruptible, ...
    wchan: str  # the kernel function it sleeps in ("0": none)
    syscall: str  # /proc/PID/task/TID/syscall: number and arguments, "running", or ""
    cpu_seconds: float | None  # over the sample

    def line(self) -> str:
        cpu = "?" if self.cpu_seconds is None else f"{self.cpu_seconds:.2f} s"
        return (
            f"thread {self.tid} ({self.name}): state {self.state}, wchan {self.wchan or '?'}, "
            f"cpu {cpu}, syscall {self.syscall or '?'}"
        )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _thread_ticks(pid: int) -> dict[int, int | None]:
    task = Path(f"/proc/{pid}/task")
    try:
        tids = sorted(int(entry.name) for entry in task.iterdir())
    except (OSError, ValueError):
        return {}
    return {tid: _ticks(task / str(tid) / "stat") for tid in tids}


def _ticks(stat: Path) -> int | None:
    """utime + stime of a /proc stat file, in clock ticks."""
    fields = _read(stat).rpartition(")")[2].split()
    try:
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def _threads(pid: int, before: dict, after: dict, seconds: float) -> list[_Thread]:
    threads = []
    for tid in sorted(set(before) | set(after)):
        task = Path(f"/proc/{pid}/task/{tid}")
        stat = _read(task / "stat").rpartition(")")[2].split()
        start, end = before.get(tid), after.get(tid)
        cpu = None if start is None or end is None else (end - start) / _TICKS_PER_SECOND
        threads.append(
            _Thread(
                tid,
                _read(task / "comm"),
                stat[0] if stat else "gone",
                _read(task / "wchan"),
                _read(task / "syscall"),
                cpu,
            )
        )
    return threads


def _summary(threads: list[_Thread], seconds: float) -> str:
    """ "3 threads; spinning: 1 thread used 0.98 s of CPU in 1.0 s" or "sleeping ...": the
    answer to the first question about a hang."""
    if not threads:
        return "gone (no /proc entry)"
    # Any CPU at all (two clock ticks): on a loaded machine a spinning thread gets a fraction.
    busy = [t for t in threads if t.cpu_seconds is not None and t.cpu_seconds >= 0.02]
    count = f"{len(threads)} thread{'s' if len(threads) != 1 else ''}"
    if busy:
        spent = ", ".join(f"{t.name or t.tid} {t.cpu_seconds:.2f} s" for t in busy)
        return f"{count}; spinning: CPU in the last {seconds:.1f} s: {spent}"
    main = threads[0]
    return (
        f"{count}; sleeping: no thread used CPU in the last {seconds:.1f} s; main thread in "
        f"{main.wchan or '?'} (syscall {(main.syscall or '?').split(' ')[0]})"
    )


def _cmdline(pid: int) -> str:
    return _read(Path(f"/proc/{pid}/cmdline")).replace("\0", " ")[:300] or "?"


def _gdb_backtrace(pid: int, seconds: float) -> list[str]:
    """gdb's `thread apply all bt` (and `py-bt` where python's gdb extension loads), or why not."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ["gdb: not on PATH (install gdb for a native backtrace of every thread)"]
    python_dir = os.path.dirname(os.path.realpath(sys.executable))  # where python3.X-gdb.py lives
    command = [
        gdb, "-p", str(pid), "-batch", "-nx",
        "-iex", "set debuginfod enabled off",  # never fetch symbols over the network
        "-iex", f"add-auto-load-safe-path {python_dir}",
        "-ex", "thread apply all bt",
        "-ex", "thread apply all py-bt",
    ]  # fmt: skip
    header = f"gdb: {' '.join(command)}"
    environment = {**os.environ, "DEBUGINFOD_URLS": ""}
    try:
        run = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=seconds, env=environment
        )
    except subprocess.TimeoutExpired as expired:
        partial = expired.stdout or b""
        partial = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        return [header, f"gdb: no answer in {seconds:.0f} s (killed); what it printed:", _backtrace_lines(partial)]
    except OSError as error:
        return [header, f"gdb: could not run: {error}"]
    return [
        header,
        _backtrace_lines(run.stdout),
        *(["gdb's errors:", run.stderr.strip()[-3000:]] if run.stderr else []),
    ]


def _backtrace_lines(output: str) -> str:
    """gdb's output without its one line per thread and library loaded."""
    noise = ("[New LWP", "[New Thread", "[Thread debugging", "Using host libthread_db")
    return "\n".join(line for line in output.splitlines() if not line.startswith(noise))
