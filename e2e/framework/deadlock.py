"""Tell a deadlocked child from a slow one, so a hang that can never end costs a second,
not the pair's whole time budget.

A process is deadlocked for good when its only thread sleeps in a private futex wait
with no timeout and it has no child process: a private futex is woken only by a thread
of the same process, and there is none other. That is how a program that wrote out of
bounds over the malloc arena's lock word hangs (`free` waits in `__lll_lock_wait_private`
for a lock nobody holds; `IndexPut_NegativeIndex` did, 1 run in 3-6). `DeadlockWatch`
reads the state from /proc (Linux; elsewhere it never fires) and reports it once it has
held, unchanged and without CPU time spent, for `DEADLOCK_SECONDS`.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Callable

# The futex syscall's number, by machine (`/proc/PID/syscall` names it by number).
_FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_PRIVATE_FLAG = 128
_FUTEX_WAITS = {0, 9}  # FUTEX_WAIT, FUTEX_WAIT_BITSET
DEADLOCK_SECONDS = 1.0


def supported() -> bool:
    """Whether the watch can see a deadlock here: a machine whose futex syscall number it
    knows, and a kernel that shows a process's syscall (`/proc/PID/syscall`)."""
    return _FUTEX_SYSCALL is not None and os.access("/proc/self/syscall", os.R_OK)


def permanent_futex_wait(pid: int) -> str | None:
    """The `/proc/PID/syscall` line when `pid` is single-threaded and sleeps in a private
    futex wait with no timeout, else None (always None where the watch is not `supported`)."""
    if _FUTEX_SYSCALL is None:
        return None
    proc = Path(f"/proc/{pid}")
    try:
        line = (proc / "syscall").read_text().strip()
        fields = line.split()
        if len(fields) < 5 or fields[0] != str(_FUTEX_SYSCALL):
            return None
        operation, timeout = int(fields[2], 16), int(fields[4], 16)
        if not operation & _FUTEX_PRIVATE_FLAG or operation & 0x7F not in _FUTEX_WAITS or timeout != 0:
            return None
        status = (proc / "status").read_text()
    except (OSError, ValueError):
        return None
    threads = next((line.split()[1] for line in status.splitlines() if line.startswith("Threads:")), "")
    return line if threads == "1" else None


def _cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


class DeadlockWatch:
    """Polled with the child's pid while waiting for its reply; `check` returns what the
    child is stuck in once it has been deadlocked (see the module) for `seconds`."""

    def __init__(self, children: Callable[[int], list[int]], seconds: float = DEADLOCK_SECONDS):
        self.children = children  # a process's live children (`isolation.child_pids`)
        self.seconds = seconds
        self._seen: tuple[str, int | None, float] | None = None  # (syscall line, CPU ticks, since)

    def check(self, pid: int) -> str | None:
        line = permanent_futex_wait(pid)
        if line is None:
            self._seen = None
            return None
        ticks, now = _cpu_ticks(pid), time.monotonic()
        if self._seen is None or self._seen[:2] != (line, ticks):
            self._seen = (line, ticks, now)
            return None
        if now - self._seen[2] < self.seconds or self.children(pid):
            return None
        return (
            f"deadlocked: its only thread has slept {now - self._seen[2]:.1f} s in a private futex wait "
            f"with no timeout, which nothing can wake (/proc/{pid}/syscall: {line})"
        )
