"""A failure case in the reducer: replayed in this process, or in a forked child for crashes.

The case itself (`Case`, `case.json` in a bundle), its replay in this process and
`compile_signature` are in `compiler.replay_runtime.replay`, which every bundle
carries; here, what the reducer adds: replaying a crash or a hang in a child killed
after a timeout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from compiler.replay_runtime import replay
from compiler.replay_runtime.crash import report_native_crashes
from compiler.replay_runtime.pipeline import PYTHON_PASS, run_entries  # noqa: F401 - re-exported
from compiler.replay_runtime.replay import (  # noqa: F401 - re-exported
    CRASH,
    ERROR,
    HANG,
    MISMATCH,
    RUNTIME_PASS,
    Case,
    arity,
    compile_signature,
    load_arrays,
)
from compiler.stages import expand  # noqa: F401 - re-exported
from e2e.framework import isolation
from e2e.framework.signature import Signature, crash_signature, ended_signature


def observe(
    case: Case,
    text: str,
    bundle_dir: Path | None = None,
    *,
    isolate: bool | None = None,
    report: Callable[[str], None] | None = None,
    timeout: float = 60,
) -> Signature | None:
    """The signature `case`'s pipeline shows on `text` (None: no failure); `report` gets the details.

    Crash and hang cases run in a forked child, killed after `timeout` seconds (a hang
    case's own `hang_seconds`): a hang shows as `timeout | <stage>`. So does a case that a
    runtime replays (its replay entry ends the pipeline): a runtime may abort the process
    on a candidate even where the failure it reduces is an error.
    """
    if isolate is None:
        isolate = case.kind in (CRASH, HANG) or bool(case.pipeline and case.pipeline[-1].startswith(RUNTIME_PASS))
    if case.kind == HANG and case.hang_seconds:
        timeout = case.hang_seconds
    if case.kind == MISMATCH or not isolate:
        return replay.observe(case, text, bundle_dir, report)

    def child():
        single_threaded()
        report_native_crashes(frames=case.stage != "execute")
        return compile_signature(text, case.stage, case.pipeline, case.pipeline[-1])[0]

    outcome = isolation.run_forked(child, timeout=timeout)
    if isinstance(outcome, isolation.Crashed):
        return crash_signature(case.stage, outcome.stderr_tail, outcome.reason)
    if isinstance(outcome, isolation.TimedOut):
        return ended_signature("timeout", case.stage)
    if isinstance(outcome, isolation.Raised):
        return ended_signature("framework", case.stage)
    return outcome


def single_threaded() -> None:
    """Call first thing in a forked child: one thread for torch and OpenMP.

    A child forked from a process whose OpenMP pool ran hangs in a barrier at its first
    parallel region; with one thread no region is parallel. The environment is for the
    processes the child starts (repro.py re-verification).
    """
    import torch

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"
    torch.set_num_threads(1)
