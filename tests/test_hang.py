"""A pair that times out is looked at before it is killed, and run once more before its
hang is called one: through the real plugin, on a module whose capture sleeps (once per
marker file, or every time), and on a real sleeping process for the stack itself."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from e2e.framework import hang_stack

# The capture (torch.export runs forward) sleeps until killed: only while the marker file
# does not exist (it is created first, so a later process passes), or on every attempt.
HANGS_IN_CAPTURE = """
import os, time
from pathlib import Path
import torch
from e2e.framework import op_test

def hangs_in_capture(x):
    marker = Path(os.environ["HANG_MARKER"])
    if torch.compiler.is_exporting() and (os.environ.get("HANG_ALWAYS") or not marker.exists()):
        marker.touch()
        time.sleep(600)
    return torch.tanh(x)

op_test("HangsInCapture", hangs_in_capture, lambda tu: [tu.rand(2, 3)])
"""


def path_without(tool: str, directory: Path) -> str:
    """A PATH with everything the current one finds except `tool`: one directory of links."""
    directory.mkdir()
    for entry in reversed(os.environ["PATH"].split(os.pathsep)):  # the first one found wins
        for found in Path(entry).glob("*") if Path(entry).is_dir() else ():
            link = directory / found.name
            if found.name != tool:
                link.unlink(missing_ok=True)
                link.symlink_to(found)
    return str(directory)


def run_hanging_suite(tmp_path: Path, *, always: bool) -> tuple[subprocess.CompletedProcess, dict, dict]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "hangs.py").write_text(textwrap.dedent(HANGS_IN_CAPTURE))
    environment = {
        **os.environ,
        "HANG_MARKER": str(tmp_path / "marker"),
        "HANG_ALWAYS": "1" if always else "",
        # gdb reads libtorch's symbols for 10-15 s: these runs see the /proc facts alone
        # (what a machine without gdb gets); test_a_stuck_process... covers gdb's part.
        "PATH": path_without("gdb", tmp_path / "bin"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),  # this checkout, not an installed copy
    }
    command = [
        sys.executable, "-m", "pytest", "-p", "e2e.plugin", "-p", "no:cacheprovider",
        "--e2e-suite", str(suite), "--config", "linalg", "--no-reduce", "--timeout", "6",
        "--reports-dir", str(tmp_path / "reports"), "-q",
    ]  # fmt: skip
    run = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    [row] = json.loads((tmp_path / "reports" / "results.json").read_text())
    run_info = json.loads((tmp_path / "reports" / "run.json").read_text())
    return run, row, run_info


def test_a_pair_that_hangs_once_is_decided_by_its_rerun_and_counted(tmp_path):
    run, row, run_info = run_hanging_suite(tmp_path, always=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert (row["outcome"], row["hung_first"]) == ("pass", "capture"), row
    [note] = [note for note in row["notes"] if note.startswith("hung once")]
    first = tmp_path / "reports" / "ir" / "HangsInCapture" / "linalg.first-attempt"
    assert "timed out in stage capture" in note and str(first) in note
    stack = (first / hang_stack.FILE_NAME).read_text()
    assert "sleeping" in stack and "gdb: not on PATH" in stack  # a missing gdb costs its lines only
    assert run_info["hung_once"]["passed_on_rerun"] == 1
    assert "1 pairs hung once and passed on rerun: HangsInCapture::linalg (hung in capture" in run.stdout


def test_a_pair_that_hangs_every_time_stays_a_timeout_with_its_stacks(tmp_path):
    run, row, run_info = run_hanging_suite(tmp_path, always=True)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert (row["outcome"], row["stage"], row["hung_first"]) == ("timeout", "capture", None), row
    first = tmp_path / "reports" / "ir" / "HangsInCapture" / "linalg.first-attempt"
    assert f"threads and stacks: {first / hang_stack.FILE_NAME}" in row["error"]
    assert "the hang reproduces" in " ".join(row["notes"])
    for attempt in (first, first.with_name("linalg")):  # the first attempt's and the rerun's
        # One thread: no tqdm monitor (the capture makes a progress bar), so the deadlock
        # watch can see a host that deadlocks.
        assert "1 thread; sleeping: no thread used CPU" in (attempt / hang_stack.FILE_NAME).read_text()
    # gdb is asked once: the rerun, which only confirms the hang, is not given to it.
    assert "gdb: not on PATH" in (first / hang_stack.FILE_NAME).read_text()
    assert "gdb: not run" in (first.with_name("linalg") / hang_stack.FILE_NAME).read_text()
    assert run_info["hung_once"]["pairs"] == 0 and "hung once" not in run.stdout


def test_a_stuck_process_is_described_from_outside_it(tmp_path):
    """Threads, states and CPU from /proc, and gdb's native and Python stacks when gdb is
    installed; the process is neither signalled nor changed (it sleeps on afterwards)."""
    code = "import threading, time\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\ntime.sleep(600)"
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        # Sample once the spinning thread exists (a loaded machine starts python slowly).
        deadline = time.monotonic() + 60
        while "Threads:\t2" not in Path(f"/proc/{process.pid}/status").read_text():
            assert time.monotonic() < deadline, "the child never started its second thread"
            time.sleep(0.05)
        stack = hang_stack.record(process.pid, sample_seconds=0.5)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()
    assert stack.summary.startswith("2 threads; spinning")
    assert "hrtimer_nanosleep" in stack.text or "clock_nanosleep" in stack.text
    if shutil.which("gdb") is None:
        assert "gdb: not on PATH" in stack.text
        pytest.skip("gdb is not installed: only the /proc part was checked")
    assert "time_sleep" in stack.text  # the native frame of the main thread
    assert 'File "<string>", line 3' in stack.text  # its Python frame (python's gdb extension)
