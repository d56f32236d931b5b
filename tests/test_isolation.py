"""Crashes, hangs and broken tests end as results; the run goes on."""

import ctypes
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from e2e.framework import isolation
from e2e.framework.registry import Test
from e2e.framework.result import CRASH, ERROR, FAIL, PASS, TIMEOUT
from e2e.framework.runner import prepare, run_pair

ROOT = Path(__file__).parent.parent


def segfault():
    ctypes.string_at(0)


def test_forked_value_comes_back():
    assert isolation.run_forked(lambda: {"x": torch.ones(2)}, timeout=30)["x"].sum() == 2


def test_segfault_and_abort_become_crashes():
    crashed = isolation.run_forked(segfault, timeout=30)
    assert isinstance(crashed, isolation.Crashed) and crashed.reason == "killed by SIGSEGV"
    aborted = isolation.run_forked(lambda: (os.write(2, b"LLVM ERROR: boom\n"), os.abort()), timeout=30)
    assert aborted.reason == "killed by SIGABRT" and "LLVM ERROR: boom" in aborted.stderr_tail


def test_hang_becomes_a_timeout_and_the_child_is_killed():
    start = time.monotonic()
    outcome = isolation.run_forked(lambda: time.sleep(60), timeout=1)
    assert isinstance(outcome, isolation.TimedOut)
    assert time.monotonic() - start < 10


def test_exception_in_the_child_is_returned_with_its_traceback():
    outcome = isolation.run_forked(lambda: 1 / 0, timeout=30)
    assert isinstance(outcome, isolation.Raised) and "ZeroDivisionError" in outcome.traceback


class Config:
    """A config of the test's own: `behaviour` decides what compile does."""

    def __init__(self, behaviour):
        self.name = "probe"
        self.behaviour = behaviour

    def compile(self, prepared, snapshots):
        snapshots.record("backend", "module {}")
        self.behaviour()
        return None

    def run(self, artifact, golden):
        return golden


def simple_test():
    return Test("Probe_basic", torch.nn.Identity, lambda m, tu: m.forward(tu.rand(2)))


@pytest.mark.parametrize(
    "behaviour, outcome",
    [(lambda: None, PASS), (segfault, CRASH), (lambda: time.sleep(60), TIMEOUT), (lambda: 1 / 0, FAIL)],
    ids=["pass", "segfault", "hang", "exception"],
)
def test_run_pair_reports_each_ending_with_its_stage(tmp_path, behaviour, outcome):
    result = run_pair(prepare(simple_test()), Config(behaviour), reports_dir=tmp_path, timeout=2)
    assert result.outcome == outcome
    if outcome != PASS:
        assert result.stage == "backend"
        assert result.ir_path and Path(result.ir_path).read_text() == "module {}"
    if outcome == CRASH:
        assert result.signature.startswith("crash | backend")


def test_a_test_that_fails_natively_is_an_error_result(tmp_path):
    broken = Test("Broken_basic", torch.nn.Identity, lambda m, tu: m.forward(tu.rand(2), tu.rand(3)))
    result = run_pair(prepare(broken), Config(lambda: None), reports_dir=tmp_path, timeout=5)
    assert result.outcome == ERROR and result.stage == "golden"
    assert "the test failed on native torch" in result.error


SUITE = '''
import ctypes
import torch
from torch._subclasses.fake_tensor import FakeTensor
from e2e.framework import op_test

def crash_when_compiled(x):
    if isinstance(x, FakeTensor):  # only while torch.export traces, i.e. in the compile stage
        ctypes.string_at(0)
    return x + 1

op_test("ForcedSegfault_basic", crash_when_compiled, lambda tu: [tu.rand(3)])
for i in range(3):
    op_test(f"Healthy{i}_basic", torch.tanh, lambda tu: [tu.rand(2, 3)])
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_segfaulting_test_leaves_the_others_running_and_reported(tmp_path, workers):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "crashy.py").write_text(textwrap.dedent(SUITE))
    (suite / "broken.py").write_text("raise RuntimeError('this test file is broken')\n")
    (tmp_path / "xfail").mkdir()
    command = [
        sys.executable, "-m", "pytest", str(suite), "--suite-dir", str(suite), "--config", "linalg",
        "--xfail-dir", str(tmp_path / "xfail"), "--reports-dir", str(tmp_path / "reports"),
        "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), "-p", "conftest", "-q", *workers,
        "--junitxml", str(tmp_path / "junit.xml"),
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "3 passed" in out and "2 failed" in out, out
    assert "ForcedSegfault_basic on linalg: crash in stage `capture`" in out
    assert "killed by SIGSEGV" in out
    assert "broken.py could not be imported" in out
    junit = (tmp_path / "junit.xml").read_text()
    assert '<property name="e2e_stage" value="capture"' in junit
    assert 'name="e2e_signature" value="crash | capture' in junit
