"""Through the real pytest plugin: nothing a test does stops the run or loses its results.

Each run is a real `pytest` subprocess over a suite of deliberately broken tests, serial
and with `-n 2`: every healthy test is reported, every broken one with its stage, and
results.json and the JUnit XML are complete.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BROKEN_SUITE = """
import ctypes, os
import torch
from e2e.framework import e2e_test, op_test

def segfault(x):
    ctypes.string_at(0)

def abort(x):
    os.abort()

def native_hang(x):
    ctypes.CDLL(None).sleep(600)

def python_hang(x):
    while True:
        pass

for i in range(3):
    op_test(f"Healthy{i}", torch.tanh, lambda tu: [tu.rand(2, 3)])
op_test("GoldenSegfault", segfault, lambda tu: [tu.rand(2)])
op_test("GoldenAbort", abort, lambda tu: [tu.rand(2)])
op_test("GoldenNativeHang", native_hang, lambda tu: [tu.rand(2)])
op_test("GoldenPythonHang", python_hang, lambda tu: [tu.rand(2)])
op_test("ReturnsNone", lambda x: None, lambda tu: [tu.rand(2)])
op_test("ReturnsString", lambda x: "text", lambda tu: [tu.rand(2)])

@e2e_test(inputs=lambda tu: [tu.rand(2)])
class Uncopyable(torch.nn.Module):
    def __deepcopy__(self, memo):
        raise TypeError("cannot be copied")
    def forward(self, x):
        return x
"""

BROKEN_FILES = {
    "import_segfault.py": "import ctypes\nctypes.string_at(0)\n",
    "import_exit.py": "import sys\nsys.exit(3)\n",
    "import_hang.py": "import ctypes\nctypes.CDLL(None).sleep(600)\n",
    "import_raises.py": "raise RuntimeError('this test file is broken')\n",
    "needs_missing.py": "import a_package_that_is_not_installed\n",
}

EXPECTED = {  # test -> (outcome, stage)
    **{f"Healthy{i}": ("pass", None) for i in range(3)},
    "GoldenSegfault": ("crash", "golden"),
    "GoldenAbort": ("crash", "golden"),
    "GoldenNativeHang": ("timeout", "golden"),
    "GoldenPythonHang": ("timeout", "golden"),
    "ReturnsNone": ("error", "golden"),
    "ReturnsString": ("error", "golden"),
    "Uncopyable": ("error", "golden"),
    "import_segfault.py::import": ("crash", "import"),
    "import_exit.py::import": ("error", "import"),
    "import_hang.py::import": ("timeout", "import"),
    "import_raises.py::import": ("error", "import"),
}


def write_suite(directory: Path, files: dict[str, str]) -> Path:
    suite = directory / "suite"
    suite.mkdir()
    for name, text in files.items():
        (suite / name).write_text(textwrap.dedent(text))
    return suite


def e2e_command(suite: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "e2e.plugin",
        "-p",
        "no:cacheprovider",
        "--e2e-suite",
        str(suite),
        "--config",
        "linalg",
        "--no-reduce",
        "--reports-dir",
        str(tmp / "reports"),
        "--junitxml",
        str(tmp / "junit.xml"),
        "-q",
        "-rs",
        *extra,
    ]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_suite_of_broken_tests_ends_with_every_result(tmp_path, workers):
    suite = write_suite(tmp_path, {"broken_tests.py": BROKEN_SUITE, **BROKEN_FILES})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        # The healthy tests' hosts start within these budgets on a machine loaded 10-14 (4 s did
        # not); the hanging tests wait them out, so they are as short as that allows.
        e2e_command(suite, tmp_path, "--timeout", "10", "--import-timeout", "15", *workers),
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    last = run.stdout.strip().splitlines()[-1]
    assert all(count in last for count in ("11 failed", "3 passed", "1 skipped")), out
    rows = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert {row["test"]: (row["outcome"], row["stage"]) for row in rows} == EXPECTED
    run_info = json.loads((tmp_path / "reports" / "run.json").read_text())
    assert run_info["status"] == "finished" and run_info["rows"] == len(EXPECTED)
    junit = (tmp_path / "junit.xml").read_text()
    assert junit.count("<testcase") == len(EXPECTED) + 1  # and the skipped file
    assert 'name="e2e_stage" value="golden"' in junit
    assert "needs the package 'a_package_that_is_not_installed'" in out
    assert "rerun: python -m pytest " in out
    segfault = next(row for row in rows if row["test"] == "GoldenSegfault")
    assert "in segfault" in segfault["error"]  # the Python stack of the crash is kept


SLOW_SUITE = """
import time
import torch
from e2e.framework import op_test

def sleeping_tanh(seconds):
    def forward(x):
        time.sleep(seconds)
        return torch.tanh(x)
    return forward

# Four quick tests, then tests that outlast any wait: the run cannot end by itself
# before the signal comes, however loaded the machine is.
for i in range(40):
    op_test(f"Slow{i:02d}", sleeping_tanh(0.3 if i < 4 else 200), lambda tu: [tu.rand(2, 3)])
"""


def sigint_as_in_a_terminal() -> None:
    """For a child run: a command started in the background by a non-interactive shell
    inherits SIGINT as ignored, and Python then never sees Ctrl-C (how these tests used
    to end "finished" when the test run itself was started that way)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def descendants(pid: int) -> set[int]:
    children: dict[int, set[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, set()).add(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.parametrize(
    "signal_number, workers",
    [(signal.SIGTERM, []), (signal.SIGINT, ["-n", "2"])],
    ids=["sigterm-serial", "sigint-xdist"],
)
def test_a_killed_run_keeps_its_results_and_leaves_no_process(tmp_path, signal_number, workers):
    suite = write_suite(tmp_path, {"slow.py": SLOW_SUITE})
    process = subprocess.Popen(
        e2e_command(suite, tmp_path, "--config", "tosa", *workers),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    rows_so_far = tmp_path / "reports" / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (rows_so_far.exists() and rows_so_far.read_text().count("\n") >= 3):
        assert process.poll() is None, f"the run ended before the signal:\n{process.communicate()[0][-4000:]}"
        time.sleep(0.2)
    spawned = descendants(process.pid)
    assert spawned, "the run had started no process"
    process.send_signal(signal_number)
    out, _ = process.communicate(timeout=120)
    left = _alive(spawned)
    deadline = time.monotonic() + 60  # poll: a loaded machine reaps late, a leak stays
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _alive(spawned)
    assert not left, f"processes left behind: {left}\n{out}"
    run_info = json.loads((tmp_path / "reports" / "run.json").read_text())
    rows = json.loads((tmp_path / "reports" / "results.json").read_text())
    streamed = [json.loads(line) for line in rows_so_far.read_text().splitlines()]
    assert run_info["status"] == "interrupted", out
    assert len(streamed) >= 3 and len(rows) >= len(streamed) and len(rows) < 40
    assert all(row["outcome"] == "pass" for row in streamed)


SIGNAL_IN_A_FINALIZER_SUITE = """
import os, signal, time
import torch
from e2e.framework import op_test

RUN = os.getpid()
forks = []

def after_fork(pid=RUN):
    # Python calls this after each fork and swallows what it raises, as it does for
    # logging's own after-fork lock release: SIGTERM lands inside it on the third host.
    forks.append(1)
    if os.getpid() == pid and len(forks) == 3:
        os.kill(pid, signal.SIGTERM)
        time.sleep(2)

os.register_at_fork(after_in_parent=after_fork)
for i in range(8):
    op_test(f"Tanh{i}", torch.tanh, lambda tu: [tu.rand(2)])
"""


def test_a_signal_swallowed_by_a_finalizer_still_stops_the_run(tmp_path):
    suite = write_suite(tmp_path, {"signalled.py": SIGNAL_IN_A_FINALIZER_SUITE})
    # A host per test, so that the third test's host is the third fork (a host serves the
    # next test when its own ended cleanly).
    environ = {**os.environ, "E2E_REUSE_HOSTS": "0"}
    run = subprocess.run(
        e2e_command(suite, tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300, env=environ
    )
    out = run.stdout + run.stderr
    assert "Exception ignored" in out  # the KeyboardInterrupt itself was swallowed
    assert run.returncode == pytest.ExitCode.INTERRUPTED, out
    run_info = json.loads((tmp_path / "reports" / "run.json").read_text())
    assert run_info["status"] == "interrupted" and 2 <= run_info["rows"] < 8, out


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def _alive(pids) -> set[int]:
    return {pid for pid in pids if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)}


# A plugin on the process that runs the session (the xdist controller, or the serial run): after
# the third result a finalizer receives Ctrl-C, and Python swallows its KeyboardInterrupt.
SIGNAL_IN_A_CONTROLLER_FINALIZER = """
import os, signal, time

class Finalizer:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)

reports = []
session_process = []  # not an xdist worker (PYTEST_XDIST_WORKER may be inherited from an outer run)

def pytest_configure(config):
    session_process.append(not hasattr(config, "workerinput"))

def pytest_runtest_logreport(report):
    if report.when == "call" and session_process[0]:
        reports.append(report)
        if len(reports) == 3:
            Finalizer()
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_swallowed_by_a_finalizer_still_ends_the_run_interrupted(tmp_path, workers):
    suite = write_suite(tmp_path, {"slow.py": SLOW_SUITE})
    # A plugin given with -p (the run's cwd is on sys.path): a conftest.py there would sit
    # above the rootdir pytest picks for the suite, and not be loaded.
    (tmp_path / "signal_in_a_finalizer.py").write_text(SIGNAL_IN_A_CONTROLLER_FINALIZER)
    run = subprocess.run(
        e2e_command(suite, tmp_path, "--config", "tosa", "-p", "signal_in_a_finalizer", *workers),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=sigint_as_in_a_terminal,
    )
    out = run.stdout + run.stderr
    assert "Exception ignored" in out and "KeyboardInterrupt" in out  # swallowed where it landed
    assert run.returncode == pytest.ExitCode.INTERRUPTED, out
    run_info = json.loads((tmp_path / "reports" / "run.json").read_text())
    assert run_info["status"] == "interrupted" and 3 <= run_info["rows"] < 40, out
    # Ended by the signal, not after a 200 s test ended on its own: none of those passed.
    rows = [json.loads(line) for line in (tmp_path / "reports" / "results.jsonl").read_text().splitlines()]
    assert not [r for r in rows if int(r["test"][-2:]) >= 4 and r["outcome"] == "pass"], out


def test_a_second_run_on_a_busy_reports_dir_is_refused(tmp_path):
    suite = write_suite(tmp_path, {"slow.py": SLOW_SUITE})
    first = subprocess.Popen(
        e2e_command(suite, tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (tmp_path / "reports" / "run.json").exists():
            time.sleep(0.2)
        second = subprocess.run(e2e_command(suite, tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=120)
    assert second.returncode == 4, second.stdout + second.stderr
    assert "is in use by another live run" in second.stderr and "--reports-dir" in second.stderr


def test_a_bad_xfail_file_under_xdist_names_its_file_and_line(tmp_path):
    suite = write_suite(
        tmp_path,
        {
            "tests.py": "import torch\nfrom e2e.framework import op_test\n"
            "op_test('Tanh', torch.tanh, lambda tu: [tu.rand(2)])\n"
        },
    )
    xfails = tmp_path / "xfail"
    xfails.mkdir()
    (xfails / "linalg.txt").write_text("Tanh  # fail: backend | x | y\nRenamedAway  # fail: backend | x | y\n")
    run = subprocess.run(
        e2e_command(suite, tmp_path, "--xfail-dir", str(xfails), "-n", "2"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert f"{xfails / 'linalg.txt'}:2: unknown test 'RenamedAway'" in run.stderr
    assert "INTERNALERROR" not in run.stdout + run.stderr


# Each module records the process that built it: its test's host.
HOSTS_SUITE = """
import ctypes, os
import torch
from e2e.framework import e2e_test

TESTS = ("A_First", "B_Second", "C_Segfaults", "D_After")

@e2e_test(inputs=lambda tu: [tu.rand(2)], params={name: {"name": name} for name in TESTS})
class Hosted(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        with open(os.environ["E2E_TEST_HOSTS"], "a") as hosts:
            hosts.write(f"{name} {os.getpid()}\\n")
        if name == "C_Segfaults":
            ctypes.string_at(0)

    def forward(self, x):
        return torch.tanh(x)
"""


@pytest.mark.parametrize("reuse", ["1", "0"])
def test_consecutive_tests_share_a_host_until_one_ends_badly(tmp_path, reuse):
    """Through the plugin: a test whose host ended cleanly hands it to the next test; a test
    that crashed its host leaves the next test a new one. `E2E_REUSE_HOSTS=0`: a host per test."""
    suite = write_suite(tmp_path, {"hosts.py": HOSTS_SUITE})
    hosts = tmp_path / "hosts.txt"
    environ = {**os.environ, "E2E_TEST_HOSTS": str(hosts), "E2E_REUSE_HOSTS": reuse}
    run = subprocess.run(
        e2e_command(suite, tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300, env=environ
    )
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr  # C_Segfaults
    pids: dict[str, list[int]] = {}
    for line in hosts.read_text().splitlines():
        name, pid = line.split()
        pids.setdefault(name, []).append(int(pid))
    assert list(pids) == ["A_First", "B_Second", "C_Segfaults", "D_After"]
    # The crash is reported from a host of its own: the adopted host, then a new one, crashed.
    assert len(pids["C_Segfaults"]) == (2 if reuse == "1" else 1)
    assert (pids["A_First"] == pids["B_Second"]) is (reuse == "1")
    if reuse == "1":
        assert pids["C_Segfaults"][0] == pids["B_Second"][0]
    assert pids["D_After"][0] not in pids["C_Segfaults"] + pids["A_First"]
    rows = json.loads((tmp_path / "reports" / "results.json").read_text())
    outcomes = {row["test"].removeprefix("Hosted_"): row["outcome"] for row in rows}
    assert outcomes == {"A_First": "pass", "B_Second": "pass", "C_Segfaults": "crash", "D_After": "pass"}
