"""A runtime's execute crash in that runtime's own terms, beside its bundle's repro.py.

A bundle whose case ends in a runtime's `_run` replay entry (`compiler.executors.replay`)
needs this project to replay; someone filing the bug with the runtime's project needs
its tools alone. So the reduced program is compiled by that runtime once more and written
as a runtime pair's native reproducer is (`write_native`: the program, the made-up inputs
the entry calls @main with, the runtime's own command), as `native/` with a `run.sh`. The
reducer runs it and keeps its verdict: does the process die with the case's signature?
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e.framework import isolation
from e2e.framework.signature import crash_signature, process_ending
from e2e.reducer.case import CRASH, Case

NATIVE_DIR = "native"

RUN_SH = """#!/bin/sh
# {runtime}, given repro.mlir and the made-up inputs repro.py calls @main with, with its own
# tools (nothing of this project): the process dies with the crash while the bug is there.
set -e
cd "$(dirname "$0")"
export PYTHONFAULTHANDLER=1  # a fatal signal worded as the suite's processes word it
{command}
"""


@dataclass
class NativeRepro:
    runtime: str  # how reports name it ("the StableHLO interpreter")
    command: str  # what run.sh runs
    verified: bool  # run.sh died with the case's signature
    detail: str  # how run.sh ended, and the signature it showed


def runtime_run_entry(case: Case) -> tuple[str, str] | None:
    """(executor, backend) when `case` is a crash replayed by a runtime's `_run` entry."""
    from compiler.replay_runtime.replay import RUNTIME_PASS

    if case.kind != CRASH or not case.pipeline or not case.pipeline[-1].startswith(RUNTIME_PASS):
        return None
    from compiler.executors import replay

    found = replay.parse(case.pipeline[-1])
    return found[:2] if found is not None and found[2] else None


def write_native_repro(
    bundle_dir: Path, case: Case, text: str, env: dict[str, str], timeout: float = 120
) -> NativeRepro | str | None:
    """`native/` for a runtime's crash case (None: not one), run once; a note when it cannot be written.

    The runtime compiles in a forked child: a runtime that aborts at compile time costs the
    native reproducer, not the bundle."""
    runtime_entry = runtime_run_entry(case)
    if runtime_entry is None:
        return None
    from compiler.executors import executor_class, replay

    runtime = executor_class(runtime_entry[0]).title
    directory = bundle_dir / NATIVE_DIR
    written = isolation.run_forked(lambda: replay.write_native(case.pipeline[-1], text, directory), timeout)
    if not isinstance(written, str):
        return f"{runtime}'s own reproducer not written: {type(written).__name__} {getattr(written, 'reason', '')}"
    script = directory / "run.sh"
    script.write_text(RUN_SH.format(runtime=runtime, command=written.strip()))
    script.chmod(0o755)
    try:
        done = isolation.run_command(["sh", "run.sh"], timeout=timeout, cwd=directory, env=env)
    except subprocess.TimeoutExpired:
        return NativeRepro(runtime, written, False, f"run.sh gave no answer in {timeout:.0f} s")
    if done.returncode == 0:
        return NativeRepro(runtime, written, False, "run.sh ran to the end: no crash")
    ending = process_ending(done.returncode)
    observed = crash_signature(case.stage, done.stderr, ending)
    return NativeRepro(runtime, written, case.signature.shows(observed), f"run.sh {ending}: {observed}")
