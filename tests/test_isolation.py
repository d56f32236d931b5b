"""Crashes, hangs, runaway memory and broken tests end as results; the run goes on."""

import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from e2e.framework import deadlock, isolation, registry
from e2e.framework import host as host_module
from e2e.framework.host import SpareHost, TestHost
from e2e.framework.isolation import MIB, Limits
from e2e.framework.prepared import prepare
from e2e.framework.registry import Test
from e2e.framework.result import CRASH, ERROR, FAIL, MEMORY, PASS, TIMEOUT
from e2e.framework.runner import run_pair
from e2e.framework.suite_files import load_suite
from e2e.reducer.pair import FailingPair

LIMITS = Limits(20, 2048 * MIB)


def segfault():
    ctypes.string_at(0)


def native_hang():
    ctypes.CDLL(None).sleep(600)  # in C: no Python signal handler runs


def allocate_without_bound():
    hoard = []
    while True:  # 16 MiB at a time until the cap stops it (the cap in these tests: 200 MiB)
        hoard.append(bytearray(16 * MIB))
        hoard[-1][::4096] = b"x" * (16 * MIB // 4096)


def test_forked_value_comes_back():
    assert isolation.run_forked(lambda: {"x": torch.ones(2)}, timeout=30)["x"].sum() == 2


def test_segfault_and_abort_become_crashes():
    crashed = isolation.run_forked(segfault, timeout=30)
    assert isinstance(crashed, isolation.Crashed) and crashed.reason == "killed by SIGSEGV"
    aborted = isolation.run_forked(lambda: (os.write(2, b"LLVM ERROR: boom\n"), os.abort()), timeout=30)
    assert aborted.reason == "killed by SIGABRT" and "LLVM ERROR: boom" in aborted.stderr_tail


def test_hang_becomes_a_timeout_and_the_child_is_killed():
    start = time.monotonic()
    outcome = isolation.run_forked(native_hang, timeout=1)
    assert isinstance(outcome, isolation.TimedOut)
    assert time.monotonic() - start < 10


def deadlock_on_a_lock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # one thread, a private futex, no timeout: nothing can ever wake it


def wait_on_a_lock_for_ten_minutes():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire(timeout=600)


needs_deadlock_watch = pytest.mark.skipif(
    not deadlock.supported(), reason="no /proc/PID/syscall or an unknown futex syscall number here"
)


@needs_deadlock_watch
def test_a_deadlocked_child_is_ended_before_its_deadline():
    outcome = isolation.run_forked(deadlock_on_a_lock, timeout=120)
    assert isinstance(outcome, isolation.TimedOut)
    assert outcome.deadlock and "futex" in outcome.deadlock


@pytest.mark.parametrize("wait", [native_hang, wait_on_a_lock_for_ten_minutes], ids=["sleep", "futex-with-timeout"])
def test_a_wait_that_could_still_end_is_given_its_deadline(wait):
    outcome = isolation.run_forked(wait, timeout=2.5)
    assert isinstance(outcome, isolation.TimedOut) and outcome.deadlock is None


@needs_deadlock_watch
def test_a_deadlocked_pair_says_so_in_its_timeout(tmp_path):
    result = run_pair(prepare(simple_test()), Config(deadlock_on_a_lock), reports_dir=tmp_path, limits=Limits(120))
    assert result.outcome == TIMEOUT and result.stage == "backend"
    assert "deadlocked" in result.error and "within the 120 s budget" in result.error


def test_a_killed_child_takes_the_processes_it_started_with_it(tmp_path):
    # A hung compiler is the child's child (iree-compile under iree.compiler): killing
    # only the child would leave it running, reparented to init, for the rest of the run.
    pid_file = tmp_path / "grandchild.pid"

    def start_a_compiler_and_hang():
        compiler = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        pid_file.write_text(str(compiler.pid))
        compiler.wait()

    outcome = isolation.run_forked(start_a_compiler_and_hang, timeout=3)
    assert isinstance(outcome, isolation.TimedOut)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while grandchild in isolation._live_parents() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert grandchild not in isolation._live_parents()


def test_runaway_allocation_is_killed_at_the_cap():
    outcome = isolation.run_forked(allocate_without_bound, timeout=60, memory_bytes=200 * MIB)
    assert isinstance(outcome, isolation.OverMemory), outcome
    assert 200 * MIB < outcome.peak_rss < 200 * MIB + isolation.rss_bytes(os.getpid()) + 200 * MIB


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


def simple_test(name="Probe_basic", module=torch.nn.Identity, invoke=lambda m, tu: m.forward(tu.rand(2))):
    return Test(name, module, invoke)


@pytest.mark.parametrize(
    "behaviour, outcome",
    [
        (lambda: None, PASS),
        (segfault, CRASH),
        (native_hang, TIMEOUT),
        (allocate_without_bound, MEMORY),
        (lambda: 1 / 0, FAIL),
    ],
    ids=["pass", "segfault", "hang", "memory", "exception"],
)
def test_run_pair_reports_each_ending_with_its_stage(tmp_path, behaviour, outcome):
    limits = Limits(3, 200 * MIB)
    result = run_pair(prepare(simple_test()), Config(behaviour), reports_dir=tmp_path, limits=limits)
    assert result.outcome == outcome
    if outcome != PASS:
        assert result.stage == "backend"
        assert result.ir_path and Path(result.ir_path).read_text() == "module {}"
    if outcome == CRASH:
        assert result.signature.format().startswith("crash | backend")
    if outcome == MEMORY:
        assert "0.2 GiB" in result.error and "--memory-cap" in result.error


class TwoStages(Config):
    """Gives the torch-backend stage its IR, then the backend stage its own, and crashes there."""

    def compile(self, prepared, snapshots):
        snapshots.record("torch-backend", 'module attributes {stage = "torch-backend"} {}')
        snapshots.record("backend", "module {}")
        segfault()


def test_a_backend_failure_points_at_the_backend_stages_ir_not_the_torch_backend_stages(tmp_path):
    # `*-backend.mlir` also matches `1-torch-backend.mlir`, which sorts first: a backend
    # crash was replayed from the torch-backend stage's input ("did not recur") and its
    # report pointed there.
    config = TwoStages(None)
    result = run_pair(prepare(simple_test()), config, reports_dir=tmp_path, limits=Limits(3, 200 * MIB))
    assert (result.outcome, result.stage) == (CRASH, "backend")
    assert Path(result.ir_path).read_text() == "module {}"
    pair = FailingPair(result, None, config, tmp_path)
    assert pair.saved_input("backend") == "module {}"
    assert "torch-backend" in pair.saved_input("torch-backend")


class Uncopyable(torch.nn.Module):
    def __deepcopy__(self, memo):
        raise TypeError("holds a handle that cannot be copied")

    def forward(self, x):
        return x


class ReturnsString(torch.nn.Module):
    def forward(self, x):
        return "not a tensor"


@pytest.mark.parametrize(
    "test, kind, words",
    [
        (simple_test(invoke=lambda m, tu: m.forward(tu.rand(2), tu.rand(3))), "invoker", "failed on native torch"),
        (simple_test(module=Uncopyable), "deepcopy", "cannot be deep-copied"),
        (simple_test(module=ReturnsString), "outputs", "returned a str"),
        (simple_test(module=lambda: torch.nn.Dropout(p=2.0)), "module_factory", "module_factory raised"),
        (simple_test(invoke=lambda m, tu: None), "outputs", "made no call"),
    ],
    ids=["invoker", "uncopyable", "string-output", "factory", "no-call"],
)
def test_a_broken_test_is_reported_as_broken_in_stage_golden(tmp_path, test, kind, words):
    result = run_pair(prepare(test), Config(lambda: None), reports_dir=tmp_path, limits=LIMITS)
    assert (result.outcome, result.stage) == (ERROR, "golden")
    assert result.signature.format() == f"golden | broken test | {kind}"
    assert words in result.error


class CrashesNatively(torch.nn.Module):
    def forward(self, x):
        segfault()


class HangsNatively(torch.nn.Module):
    def forward(self, x):
        native_hang()


class HangsInPython(torch.nn.Module):
    def forward(self, x):
        while True:
            pass


@pytest.mark.parametrize(
    "module, outcome", [(CrashesNatively, CRASH), (HangsNatively, TIMEOUT), (HangsInPython, TIMEOUT)]
)
def test_a_golden_run_that_crashes_or_hangs_ends_as_every_configs_result(tmp_path, module, outcome):
    host = TestHost(
        simple_test(module=module),
        shape_mode="annotated",
        config_loader=lambda n: Config(lambda: None),
        golden_limits=Limits(2, 200 * MIB),
    )
    try:
        results = [host.run(name, tmp_path, LIMITS) for name in ("linalg", "tosa")]
    finally:
        host.close()
    assert [(r.outcome, r.stage, r.config) for r in results] == [
        (outcome, "golden", "linalg"),
        (outcome, "golden", "tosa"),
    ]


class Sharing(Config):
    """Compiles through a shared frontend that counts its computations in the test's process."""

    computed = 0

    def __init__(self, name, behaviour=lambda: None):
        super().__init__(behaviour)
        self.name = name

    def compile(self, prepared, snapshots):
        def frontend():
            Sharing.computed += 1
            return Sharing.computed

        snapshots.record("backend", "module {}")
        self.behaviour()
        return prepared.share("frontend", frontend)

    def run(self, computations, golden):
        if computations != 1:
            raise AssertionError(f"the frontend was computed {computations} times in this host")
        return golden


def run_on_one_host(config_loader, names, tmp_path):
    """The Results of the named configs, in order, on one test's host."""
    host = TestHost(simple_test(), shape_mode="annotated", config_loader=config_loader, golden_limits=LIMITS)
    try:
        return [host.run(name, tmp_path, LIMITS) for name in names]
    finally:
        host.close()


def test_configs_of_one_test_share_its_host(tmp_path):
    """The second config reuses what the first one computed, in the same host."""
    first, second = run_on_one_host(Sharing, ["first", "second"], tmp_path)
    assert (first.outcome, second.outcome) == (PASS, PASS), second.error
    assert "shared: reused 'frontend' from an earlier config of this test" in second.notes


@pytest.mark.parametrize(
    "behaviour, outcome",
    [(segfault, CRASH), (native_hang, TIMEOUT), (allocate_without_bound, MEMORY)],
    ids=["segfault", "hang", "memory"],
)
def test_a_pair_that_ends_its_host_is_its_own_result_and_the_next_pair_gets_a_new_host(tmp_path, behaviour, outcome):
    def load(name):
        return Sharing(name, behaviour if name == "bad" else lambda: None)

    host = TestHost(simple_test(), shape_mode="annotated", config_loader=load, golden_limits=LIMITS)
    try:
        bad = host.run("bad", tmp_path, Limits(3, 200 * MIB))
        good = host.run("good", tmp_path, LIMITS)
    finally:
        host.close()
    assert (bad.outcome, bad.stage, bad.config) == (outcome, "backend", "bad")
    assert bad.ir_path and Path(bad.ir_path).read_text() == "module {}"  # the IR the stage was given
    assert good.outcome == PASS, good.error
    assert "ran on a new test host: an earlier one ended after bad" in good.notes


def test_a_program_that_gave_a_wrong_answer_retires_its_host(tmp_path):
    """It may have corrupted the host's heap: the next config must not inherit that,
    only what the test's configs share."""

    class WrongOnce(Sharing):
        def run(self, computations, golden):
            super().run(computations, golden)
            if self.name == "wrong":
                return [type(item)(item.method, item.inputs, item.outputs + 1) for item in golden]
            return golden

    wrong, good = run_on_one_host(WrongOnce, ["wrong", "good"], tmp_path)
    assert (wrong.outcome, wrong.stage) == (FAIL, "compare")
    assert good.outcome == PASS, good.error
    assert "ran on a new test host: an earlier one ended after wrong" in good.notes
    # The retiring host handed its capture over: the new one did not compute it again.
    assert "shared: reused 'frontend' from an earlier config of this test" in good.notes


def test_a_pair_whose_comparison_raised_retires_its_host(tmp_path):
    """A program that wrote out of bounds can leave values the comparison cannot read:
    the framework error is the pair's result, and the next config gets a new host."""

    class Unreadable(Sharing):
        def run(self, computations, golden):
            super().run(computations, golden)
            return None if self.name == "unreadable" else golden  # compare_traces raises on it

    unreadable, good = run_on_one_host(Unreadable, ["unreadable", "good"], tmp_path)
    assert (unreadable.outcome, unreadable.stage) == (ERROR, "compare")
    assert good.outcome == PASS, good.error
    assert "ran on a new test host: an earlier one ended after unreadable" in good.notes


def test_each_config_in_a_host_starts_from_the_same_random_state(tmp_path):
    class Draws(Sharing):
        def compile(self, prepared, snapshots):
            super().compile(prepared, snapshots)
            return types.SimpleNamespace(notes=[f"drew {torch.rand(1).item()}"])

        def run(self, artifact, golden):
            return golden

    first, second = run_on_one_host(Draws, ["first", "second"], tmp_path)
    assert first.outcome == second.outcome == PASS
    assert first.notes[0].startswith("drew ") and first.notes[0] == second.notes[0]


def test_a_large_reply_and_the_one_after_it_arrive_whole():
    """A reply far larger than a pipe's buffer (a capture, a host's outputs) arrives in
    many reads, and the reply queued behind it is not lost or cut."""
    big = bytes(range(256)) * ((64 << 20) // 256)

    def serve(channel):
        channel.receive()
        channel.send(big)
        channel.send("after")
        channel.receive()

    child = isolation.Child(serve, name="host")
    try:
        assert child.request("go", Limits(seconds=120)) == big
        assert child.wait_reply(Limits(seconds=60)) == "after"
    finally:
        child.close()


def test_children_leave_nothing_in_the_temporary_directory(tmp_path, monkeypatch):
    """A child's stderr file has no name from the start: a run killed before it closes its
    children (SIGKILL, a crash of the worker) leaves no `e2e-*.stderr` behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    crashed = isolation.run_forked(lambda: os.abort(), timeout=60)
    assert isinstance(crashed, isolation.Crashed)
    child = isolation.Child(lambda channel: (os.write(2, b"said on stderr\n"), channel.receive()), name="host")
    time.sleep(0.5)
    assert child.request("ignored", Limits(seconds=60)).stderr_tail == "said on stderr"
    assert list(tmp_path.iterdir()) == []  # not even while the child ran, nor after it died unclosed


def _leave_files_then(ending):
    """Files left in the temporary directory by the child and by a process it started."""

    def body():
        Path(tempfile.mkdtemp(prefix="e2e-tosa-"), "program.mlir").write_text("module {}")
        subprocess.run(["sh", "-c", 'mktemp -p "$TMPDIR"'], check=True, capture_output=True)
        return ending()

    return body


@pytest.mark.parametrize(
    "ending, outcome",
    [
        (lambda: "done", str),
        (lambda: os.abort(), isolation.Crashed),
        (lambda: time.sleep(600), isolation.TimedOut),
    ],
    ids=["returns", "crashes", "hangs"],
)
def test_what_a_child_leaves_in_its_temporary_directory_goes_when_it_does(tmp_path, monkeypatch, ending, outcome):
    """An executor's working directory (the TOSA reference model's) is left behind when its
    failed program is never closed, or when its host is killed: it lives in the host's own
    temporary directory, removed once the host is reaped however it ended."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert isinstance(isolation.run_forked(_leave_files_then(ending), timeout=5), outcome)
    isolation._REAPER.poll(wait=True)
    assert list(tmp_path.iterdir()) == []


class _TanhMatmul(torch.nn.Module):
    def forward(self, x, y):
        return torch.tanh(x @ y)


def test_a_capture_of_an_earlier_run_compiles_to_the_same_result(tmp_path):
    """The frontend cache: a second run's hosts take the first run's capture (noted), and
    every config's outcome is the same as with a capture of its own."""
    from e2e.configs import load_config
    from e2e.framework.cache import FrontendCache

    test = Test("Probe_cached_capture", _TanhMatmul, lambda m, tu: m.forward(tu.rand(3, 4), tu.rand(4, 5)))
    store = FrontendCache(tmp_path / "frontend")
    runs = []
    for _ in range(2):
        host = TestHost(
            test, shape_mode="annotated", config_loader=load_config, golden_limits=LIMITS, frontend_cache=store
        )
        try:
            runs.append([host.run(name, tmp_path / "reports", LIMITS) for name in ("linalg", "tosa")])
        finally:
            host.close()
    first, second = runs
    assert [r.outcome for r in first] == [r.outcome for r in second] == [PASS, PASS], [r.error for r in second]
    cached = "frontend cache: reused ('fx-import', 'forward', ((torch.float32, (3, 4)), (torch.float32, (4, 5))), None)"
    assert not any(n.startswith("frontend cache") for n in first[0].notes)
    assert [n.startswith(cached) for n in second[0].notes] == [True]
    assert "capture" in first[0].stage_seconds and "capture" not in second[0].stage_seconds


def test_what_a_host_imported_from_a_library_is_imported_here_for_the_hosts_after_it(tmp_path, monkeypatch):
    library = tmp_path / "site-packages"
    (library / "lazylib").mkdir(parents=True)
    (library / "lazylib" / "__init__.py").write_text("")
    (library / "lazylib" / "models.py").write_text("class Model:\n    pass\n")
    (tmp_path / "suite_helper.py").write_text("VALUE = 1\n")  # not a library: never imported here
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(host_module.sysconfig, "get_paths", lambda: {"purelib": str(library), "platlib": str(library)})

    def build():
        import lazylib.models  # noqa: F401 - imported lazily, as transformers' model classes are
        import suite_helper  # noqa: F401

        return torch.nn.Identity()

    assert "lazylib.models" not in sys.modules
    host = TestHost(simple_test(module=build), shape_mode="annotated", config_loader=Config, golden_limits=LIMITS)
    try:
        assert host.golden_failure is None
        assert "lazylib" in sys.modules and "lazylib.models" in sys.modules
        assert "suite_helper" not in sys.modules
    finally:
        host.close()
        for name in ("lazylib", "lazylib.models"):
            sys.modules.pop(name, None)


SPARE_SUITE = (
    "import torch\nfrom e2e.framework import op_test\nop_test('Spare_basic', torch.tanh, lambda tu: [tu.rand(2, 3)])\n"
)


def _host_pid(prepared, state):
    return os.getpid(), os.environ.get("E2E_SET_AFTER_THE_SPARE")


def _no_config(name):  # module-level: a spare host is handed its loader by pickle
    raise AssertionError(f"no config was asked for: {name}")


@pytest.mark.parametrize(
    "warm, from_file, adopted",
    [(lambda: None, True, True), (os.abort, True, False), (lambda: None, False, False)],
    ids=["adopted", "died-warming", "no-suite-file"],
)
def test_a_spare_host_becomes_the_first_tests_host_or_a_host_is_forked_instead(
    tmp_path, monkeypatch, warm, from_file, adopted
):
    """The spare, forked before its test was known, imports the test's file and serves as
    its host; one that died (or a test with no file to import) leaves a host forked here."""
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    (tmp_path / "spare_suite.py").write_text(SPARE_SUITE)
    spare = SpareHost([warm])
    spare_pid = spare.child.pid
    if warm is os.abort:  # dead before its test comes (a spare whose test came first skips its warm-up)
        _wait_until_dead(spare_pid)
    monkeypatch.setenv("E2E_SET_AFTER_THE_SPARE", "1")  # as --jit-target sets E2E_JIT_TARGET at configure
    load_suite([tmp_path], isolate=False)  # after the fork: the spare imports the file itself
    test = registry.GLOBAL_TEST_REGISTRY["Spare_basic"] if from_file else simple_test()
    host = TestHost(test, shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS, spare=spare)
    try:
        assert host.golden_failure is None
        pid, environ = host.call(_host_pid, LIMITS)
        assert (pid == spare_pid) is adopted
        assert environ == "1"  # the parent's environment at adoption, not at the spare's fork
    finally:
        host.close()
    assert not spare.child.alive or adopted


def _wait_until_dead(pid: int) -> None:
    """Until `pid` exited (a zombie, not yet reaped by its parent)."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, f"{pid} is still running"
        time.sleep(0.01)


def _slow_step():
    time.sleep(1.0)  # the spare's test comes meanwhile


def test_a_spare_whose_test_comes_while_it_warms_up_stops_after_the_step_it_is_in(tmp_path, monkeypatch):
    """The rest of the warm-up (here a step that would kill it) is not run once its test is known."""
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    (tmp_path / "spare_suite.py").write_text(SPARE_SUITE)
    spare = SpareHost([_slow_step, os.abort])
    spare_pid = spare.child.pid
    load_suite([tmp_path], isolate=False)
    test = registry.GLOBAL_TEST_REGISTRY["Spare_basic"]
    host = TestHost(test, shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS, spare=spare)
    try:
        assert host.golden_failure is None
        assert host.call(_host_pid, LIMITS)[0] == spare_pid
    finally:
        host.close()


def test_a_command_that_overstays_is_killed_with_everything_it_started(tmp_path):
    # A wrapper that starts the real program and waits, as torch-mlir-opt's launcher does.
    pid_file = tmp_path / "grandchild"
    script = f"sleep 600 & echo $! > {pid_file}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        isolation.run_command(["sh", "-c", script], timeout=2)
    state = Path(f"/proc/{int(pid_file.read_text())}/stat")

    def gone() -> bool:
        try:
            return state.read_text().split(") ")[1].startswith("Z")
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 30  # SIGKILL lands at once; a loaded machine reaps late
    while not gone():
        assert time.monotonic() < deadline, "the grandchild outlived the timeout"
        time.sleep(0.05)


def test_a_command_gets_the_memory_cap():
    grab = "import sys\ntry:\n    b = bytearray(1 << 30)\nexcept MemoryError:\n    sys.exit(7)\n"
    done = isolation.run_command([sys.executable, "-c", grab], timeout=60, memory_bytes=256 << 20)
    assert done.returncode == 7, done.stderr
    assert isolation.run_command([sys.executable, "-c", grab], timeout=60).returncode == 0


REUSE_SUITE = (
    "import torch\nfrom e2e.framework import op_test\n"
    "op_test('Reuse_first', torch.tanh, lambda tu: [tu.rand(2, 3)])\n"
    "op_test('Reuse_second', torch.exp, lambda tu: [tu.rand(4)])\n"
)


def _speak(prepared, state):
    print(f"said while serving {prepared.test.name}", file=sys.stderr, flush=True)
    return os.getpid(), prepared.test.name, prepared.golden[0].inputs[0].shape


def _abort(prepared, state):
    os.abort()


def _reuse_tests(tmp_path, monkeypatch) -> dict:
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    (tmp_path / "reuse_suite.py").write_text(REUSE_SUITE)
    load_suite([tmp_path], isolate=False)
    return registry.GLOBAL_TEST_REGISTRY


def test_a_host_whose_test_ended_cleanly_serves_the_next_test_with_its_own_module_and_output(tmp_path, monkeypatch):
    """Handed over, the same process builds the next test's module and golden run; what the
    first test wrote to stderr is not in the tail of the second's crash; a dead host is not
    handed over."""
    tests = _reuse_tests(tmp_path, monkeypatch)
    first = TestHost(tests["Reuse_first"], shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS)
    pid, name, shape = first.call(_speak, LIMITS)
    assert (name, shape) == ("Reuse_first", (2, 3))  # the golden run's inputs
    spare = first.hand_over()
    first.close()  # what the session does: the handed-over process is not closed with it
    assert spare is not None and spare.child.alive and spare.child.pid == pid
    second = TestHost(
        tests["Reuse_second"], shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS, spare=spare
    )
    try:
        assert second.call(_speak, LIMITS) == (pid, "Reuse_second", (4,))  # the next test's own golden run
        ended = second.call(_abort, LIMITS)
        assert isinstance(ended, isolation.Crashed)
        assert "said while serving Reuse_second" in ended.stderr_tail
        assert "Reuse_first" not in ended.stderr_tail
        assert second.hand_over() is None
    finally:
        second.close()


def test_a_host_that_grew_past_the_bound_or_whose_test_is_broken_is_not_handed_over(tmp_path, monkeypatch):
    tests = _reuse_tests(tmp_path, monkeypatch)
    grown = TestHost(tests["Reuse_first"], shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS)
    monkeypatch.setattr(host_module, "REUSE_GROWTH_BYTES", -(1 << 40))  # any size is past it
    assert grown.hand_over() is None
    assert grown.alive  # still this test's host until closed
    grown.close()
    monkeypatch.setattr(host_module, "REUSE_GROWTH_BYTES", 1 << 40)
    broken = TestHost(
        simple_test(invoke=lambda m, tu: 1 / 0), shape_mode="annotated", config_loader=_no_config, golden_limits=LIMITS
    )
    assert broken.golden_failure is not None
    assert broken.hand_over() is None
    broken.close()


class _WithLstmCell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(2, 2)

    def forward(self, x):
        return self.cell(x)[0]


class _AsksForLstmCell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.RNNCell(2, 2)

    def forward(self, x):
        if isinstance(self.cell, torch.nn.LSTMCell):
            return x
        return self.cell(x)


def _scripts(module_class) -> bool:
    try:
        torch.jit.script(module_class())
    except Exception:  # noqa: BLE001 - whether it scripts is the answer
        return False
    return True


def _scripts_after(previous, forget: bool) -> bool:
    for module_class in previous:  # what the previous tests on the host scripted
        _scripts(module_class)
    if forget:
        host_module._forget_test()
    return _scripts(_AsksForLstmCell)


@pytest.mark.parametrize(
    "previous, forget, scripts",
    [((), False, False), ((_WithLstmCell,), False, True), ((_WithLstmCell,), True, False)],
    ids=["new-process", "leaked", "forgotten"],
)
def test_a_host_forgets_the_torchscript_classes_its_last_test_compiled(previous, forget, scripts):
    """In a new process `isinstance(self.cell, torch.nn.LSTMCell)` does not script; after a
    test scripted an LSTMCell it does (the leak this guards against). A host handed to the
    next test forgets it, as a new fork would (the suite's `Cell_RNNNoBias` on torchscript
    passed or failed by the test its host served before)."""
    assert isolation.run_forked(lambda: _scripts_after(previous, forget), timeout=120) is scripts


def _collected_and_frozen() -> tuple[bool, bool, int]:
    import gc
    import weakref

    class Node:
        pass

    def make_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    gc.disable()  # only the hand-over collects here
    kept = [Node() for _ in range(20_000)]  # the host's own state: lives on
    garbage = make_cycle()  # the last test's objects: a cycle nothing refers to
    host_module._forget_test()
    after = Node()  # the next test's
    unfrozen = gc.get_objects()
    return garbage() is None, kept[0] not in unfrozen and after in unfrozen, len(unfrozen)


def test_a_host_hands_over_with_the_last_tests_garbage_collected_and_its_own_state_frozen():
    """The hand-over collects what the last test left in cycles, and freezes what survives
    (the host's own state), so the next test's collection looks only at its own objects."""
    collected, frozen, unfrozen = isolation.run_forked(_collected_and_frozen, timeout=120)
    assert collected and frozen and unfrozen < 1000
