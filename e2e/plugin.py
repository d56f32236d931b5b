"""The pytest plugin of the e2e suite (installed as a `pytest11` entry point).

Each test registered by a suite file becomes one item per config,
`<file>::<TestName>::<config>`, so `-k tosa`, `-k "MmModule and linalg"`, `--lf`, `-x`,
`-n 2` and `--junitxml` work as usual. Suite directories come from `--e2e-suite DIR`
or the `e2e_suite` ini option (this repository's pyproject sets `e2e/test_suite`).

How a test runs: its module is built and its golden trace computed in a forked *test
host* (`e2e.framework.host`), which then runs each config under the pair's limits
(`--timeout`, `--memory-cap`); a pair that crashes the host leaves the rest to a new one. The pytest process never runs a test's module,
so nothing a test does can end the run. Under xdist, the items of one test form one
scheduling scope, so a test's configs run on one worker and share its host.
Expected failures come from `xfail/<config>[.static].txt` and are strict: a test that
passes fails and names the line to delete; one that fails differently fails with both
signatures.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from compiler.replay_runtime.target import DEFAULT, TARGETS, jit_target
from compiler.replay_runtime.target import ENV as JIT_TARGET_ENV
from e2e.collect import E2EFailure, E2EFile, E2EItem, ResultItem
from e2e.configs import CONFIG_NAMES, OPT_IN_CONFIG_NAMES, RUNTIME_CONFIG_NAMES, XfailError, load_xfails
from e2e.framework import isolation
from e2e.framework.isolation import GIB
from e2e.framework.platform import cpu_description, torch_cpu_capability
from e2e.framework.report import header_lines, summarize
from e2e.framework.result import PASS, SHAPE_MODES, SKIP
from e2e.framework.run_record import ReportsDirBusy, RunRecord
from e2e.framework.shards import Durations, ShardSpec, scope_of, scopes_of
from e2e.framework.shards import plan as shard_plan
from e2e.framework.suite_files import IMPORT_BUDGET, SuiteFile, clean_probes, load_suite
from e2e.opinfo import SLICES as OPINFO_SLICES
from e2e.report_tables import report_tables
from e2e.session import DEFAULT_MEMORY_CAP_GIB, NO_ISOLATION_TURNS_OFF, STATE, E2EState, has_timeout, start_spare


def pytest_addhooks(pluginmanager):
    from e2e import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    # At registration, the plugin's earliest hook: the first host warms up from here on,
    # beside the rest of pytest's start (`E2EState.keep_spare` ends it if unneeded).
    start_spare()


def pytest_addoption(parser):
    group = parser.getgroup("e2e", "PyTorch -> MLIR e2e suite")
    group.addoption(
        "--e2e-suite",
        "--suite-dir",
        dest="e2e_suite",
        action="append",
        default=[],
        help="a directory (or file) of e2e tests to run; repeatable (default: the e2e_suite ini)",
    )
    group.addoption(
        "--config",
        action="append",
        default=[],
        help=f"configs to run, comma separated or repeated: {', '.join(CONFIG_NAMES)}, "
        f"{', '.join(OPT_IN_CONFIG_NAMES)} (opt-in), a runtime config "
        f"({', '.join(RUNTIME_CONFIG_NAMES)}), an installed config's name, "
        f"or module:attribute (default: {', '.join(CONFIG_NAMES)})",
    )
    group.addoption(
        "--shapes",
        choices=SHAPE_MODES,
        default="annotated",
        help="annotated: `-1` dims of annotate_args are dynamic (default); "
        "static: the example inputs' shapes, as upstream torch-mlir exports them",
    )
    group.addoption(
        "--reports-dir", default=None, help="results, saved IR and reproducers (default: <rootdir>/reports)"
    )
    group.addoption("--xfail-dir", default=None, help="directory of the <config>[.static].txt xfail sets")
    group.addoption(
        "--opinfo-slice",
        choices=sorted(OPINFO_SLICES),
        default=None,
        help="run the OpInfo sweep: ci (sample 0 of one op in 8) or full; its suite and its xfail sets "
        "(e2e/opinfo/xfail/<slice>; an explicit --xfail-dir wins)",
    )
    group.addoption(
        "--generate",
        type=int,
        default=None,
        metavar="N",
        help="run N generated programs (e2e/generate), seeds --generate-seed S..S+N-1, as the suite",
    )
    group.addoption(
        "--generate-seed", type=int, default=0, metavar="S", help="the first seed of --generate (default 0)"
    )
    group.addoption(
        "--import-timeout",
        type=float,
        default=IMPORT_BUDGET,
        help=f"seconds a suite file's import probe may take (default {IMPORT_BUDGET:g}; "
        "a file that computes its tests at import, as the OpInfo sweep does, takes minutes)",
    )
    group.addoption(
        "--memory-cap",
        type=float,
        default=DEFAULT_MEMORY_CAP_GIB,
        help=f"GiB a pair's child may hold resident before it is killed (default {DEFAULT_MEMORY_CAP_GIB}; 0: none)",
    )
    group.addoption(
        "--no-result-cache",
        action="store_true",
        help="rerun every pair (by default an unchanged test on an unchanged compiler reuses its result)",
    )
    group.addoption(
        "--no-frontend-cache",
        action="store_true",
        help="capture and import every test again (by default a capture whose test, torch and capture code "
        "are unchanged is taken from an earlier run, and its import too while torch-mlir and the importer are)",
    )
    group.addoption(
        "--no-program-cache",
        action="store_true",
        help="compile every program again (by default the eager config's ops lowered by an earlier test host "
        "or run, on unchanged torch, torch-mlir and compiler, are only JIT-compiled)",
    )
    group.addoption(
        "--no-isolation",
        action="store_true",
        help=f"build, compile and run in the pytest process, for pdb; this turns off {NO_ISOLATION_TURNS_OFF}",
    )
    group.addoption(
        "--jit-target",
        choices=sorted(TARGETS),
        default=None,
        help=f"the CPU compiled programs are built for (RefBackend, IREE, XLA; default {DEFAULT}, or "
        f"E2E_JIT_TARGET): a fixed target makes undefined behaviour read the same on every machine",
    )
    group.addoption(
        "--shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based): a test's configs stay together; tests are dealt longest first "
        "to the least-loaded shard, by the durations of an earlier run (see --shard-durations)",
    )
    group.addoption(
        "--shard-durations",
        default=None,
        metavar="PATH",
        help="the results (reports dir, results.json or results.jsonl) whose durations --shard balances by "
        "(default: the durations pytest's cache keeps for ordering); give every shard the same",
    )
    group.addoption(
        "--baseline",
        default=None,
        metavar="PATH",
        help="an earlier run's results (reports dir, results.json or .jsonl): the e2e summary says what changed "
        "(as python -m e2e.diff does), for the pairs this run ran",
    )
    group.addoption("--no-reduce", action="store_true", help="do not write reproducer bundles for failures")
    group.addoption(
        "--reduce-unnamed",
        action="store_true",
        help="write bundles only for wrong results and crashes whose signature names no op: the bundle's "
        "guilty op is what tells such failures apart (a fuzzing campaign's blocks)",
    )
    group.addoption("--reduce-timeout", type=float, default=60.0, help="reducer time box per failure, s (default 60)")
    group.addoption("--reduce-xfailed", action="store_true", help="write bundles for expected failures too")
    parser.addini("e2e_suite", type="paths", default=[], help="directories of e2e tests run by default")
    parser.addini("e2e_xfail_dir", type="paths", default=[], help="directory of the xfail sets")


def pytest_configure(config):
    if config.getoption("jit_target"):  # before anything compiles; forked hosts inherit it
        os.environ[JIT_TARGET_ENV] = config.getoption("jit_target")
    state = E2EState(config)
    config.stash[STATE] = state
    for mark, text in (
        ("opinfo", "OpInfo sweep tests"),
        ("opinfo_ci", "the OpInfo sweep's CI slice (--opinfo-slice ci)"),
        ("models", "tests that need optional model packages"),
    ):
        config.addinivalue_line("markers", f"{mark}: {text}")
    if (config.getoption("e2e_suite") or state.opinfo_slice or state.generate) and not _args_given(config):
        config.args[:] = [str(p) for p in state.suite_paths]  # `pytest --e2e-suite DIR` from anywhere
    if state.is_worker:
        isolation.die_with_parent()
    # torch, torch-mlir and the project are loaded and live for the whole run: the garbage
    # collector need not walk their ~10^6 objects again (pytest's collections at the end
    # of a run took 0.4 s of a one-pair run). Forked hosts freeze again.
    gc.freeze()
    _stop_on_sigterm()
    config.pluginmanager.register(RunRecorder(state), "e2e-run-recorder")
    _configure_shard_and_baseline(config, state)
    runs_pairs = (
        _runs_the_suite(config, state)
        and not config.option.collectonly
        and (state.is_worker or not getattr(config.option, "numprocesses", None))
    )
    state.keep_spare(runs_pairs)
    if _runs_the_suite(config, state) and not state.is_worker and not config.option.collectonly:
        if getattr(config.option, "numprocesses", None) and state.xfail_dir:
            # A worker's collection error reaches the controller as an opaque INTERNALERROR:
            # check the xfail sets here, from the test names the import probes report.
            state.probed = load_suite(state.suite_paths, state.import_limits, register=False, probes=state.probes)
            _load_xfail_sets(state, list(state.probed.values()))
        state.record = RunRecord(state.reports_dir, _run_meta(config, state))
        try:
            state.record.start()
        except ReportsDirBusy as error:
            state.record = None
            raise pytest.UsageError(str(error)) from None


def _configure_shard_and_baseline(config, state: E2EState) -> None:
    """`--shard`, `--shard-durations` and `--baseline`, checked before anything runs."""
    from e2e.framework.results_files import ResultsError, load_rows, results_file

    if config.getoption("shard"):
        try:
            state.shard = ShardSpec.parse(config.getoption("shard"))
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
        config.pluginmanager.register(Sharder(state), "e2e-sharder")
    elif config.getoption("shard_durations"):
        raise pytest.UsageError("--shard-durations is for --shard I/N")
    for option in ("shard_durations", "baseline"):
        path = config.getoption(option)
        if path:
            try:
                results_file(path)
            except ResultsError as error:
                raise pytest.UsageError(f"--{option.replace('_', '-')}: {error}") from None
    if config.getoption("baseline") and not state.is_worker:
        try:
            state.baseline = load_rows(config.getoption("baseline"))[0]
        except ResultsError as error:
            raise pytest.UsageError(f"--baseline: {error}") from None


def _args_given(config) -> bool:
    source = getattr(config, "args_source", None)
    return source is not None and source.name == "ARGS"


def _runs_the_suite(config, state: E2EState) -> bool:
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if any(path == s or s.is_relative_to(path) or path.is_relative_to(s) for s in state.suite_paths):
            return True
    return False


_SIGNALLED: list[int] = []
_INTERRUPT_ARRIVED = threading.Event()  # the KeyboardInterrupt reached pytest's session


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run like Ctrl-C: results so far are written, children killed.

    A signal that lands while Python runs a finalizer (a `__del__`, an after-fork hook,
    a logging lock release) raises its KeyboardInterrupt there, and Python swallows it
    as unraisable; the run would go on. So the run stops after the test in progress, and
    the first signal also starts a watchdog that sends it again to the main thread every
    two seconds until pytest has seen the interrupt, whatever the run is waiting for (an
    xdist worker's next event may be minutes away)."""

    def interrupt(number, frame):
        if not _SIGNALLED:
            threading.Thread(target=_resend_until_it_arrives, args=(number,), daemon=True).start()
        _SIGNALLED.append(number)
        raise KeyboardInterrupt(f"signal {number}")

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupt)


def _resend_until_it_arrives(number: int) -> None:
    while not _INTERRUPT_ARRIVED.wait(2.0):
        signal.pthread_kill(threading.main_thread().ident, number)


@pytest.hookimpl(tryfirst=True)  # before the terminal's, which takes its time to print the traceback
def pytest_keyboard_interrupt(excinfo):
    _INTERRUPT_ARRIVED.set()


def pytest_runtest_logfinish(nodeid, location):
    # The quick way out when the interrupt was swallowed: after the test in progress.
    if _SIGNALLED and not _INTERRUPT_ARRIVED.is_set():
        raise KeyboardInterrupt(f"signal {_SIGNALLED[0]}")


def _run_meta(config, state: E2EState) -> dict:
    import torch
    import torch_mlir

    return {
        "command": " ".join(sys.argv),
        "configs": list(state.configs),
        "shape_mode": state.shape_mode,
        "torch": f"{torch.__version__} ({Path(torch.__file__).parent})",
        "torch_mlir": f"{_version('torch-mlir')} ({next(iter(torch_mlir.__path__))})",
        "platform": torch_cpu_capability(),
        "cpu": cpu_description(),
        "jit_target": jit_target().name,
        "budget_s": state.budget,
        "memory_cap_gib": state.memory_cap / GIB if state.memory_cap else None,
        **({"shard": {"index": state.shard.index, "count": state.shard.count}} if state.shard else {}),
    }


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def pytest_report_header(config):
    state = config.stash.get(STATE, None)
    if state is None or not state.suite_paths:
        return None
    return header_lines(_run_meta(config, state), state.suite_paths, state.reports_dir)


# --- collection ------------------------------------------------------------------------


def _python_plugin_takes(file_path: Path, parent) -> bool:
    """Whether pytest's python plugin will offer this file to `pytest_pycollect_makemodule`."""
    from _pytest.pathlib import fnmatch_ex

    if not parent.config.pluginmanager.has_plugin("python"):  # `-p no:python`
        return False
    if parent.session.isinitpath(file_path):
        return True
    return any(fnmatch_ex(pattern, file_path) for pattern in parent.config.getini("python_files"))


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent):
    # A suite directory with an `__init__.py` (upstream's has one), and every package above
    # it, is a plain directory to us. As a Package, pytest would import its `__init__.py`
    # when its first item runs, putting the package root first on sys.path: upstream's
    # `torch_mlir_e2e_test` would then shadow this project's, and the suite files, imported
    # when their first test runs, would import upstream's framework.
    state = parent.config.stash[STATE]
    resolved = path.resolve()
    if any(resolved == suite or resolved in suite.parents for suite in state.suite_paths):
        return pytest.Dir.from_parent(parent, path=path)
    return None


def pytest_collect_file(file_path: Path, parent):
    state = parent.config.stash[STATE]
    if file_path.suffix == ".py" and file_path.resolve() in state.suite_files:
        if not _python_plugin_takes(file_path, parent):
            return E2EFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    # A suite file named test_*.py, or given on the command line, is ours, not a Module.
    state = parent.config.stash[STATE]
    if module_path.resolve() in state.suite_files:
        return E2EFile.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(session, config, items):
    state = config.stash[STATE]
    e2e_items = [i for i in items if isinstance(i, E2EItem)]
    if not e2e_items:
        return
    xfails = _load_xfail_sets(
        state, list(state.loaded_suite.values()), every_file=set(state.loaded_suite) >= state.suite_files
    )
    budget_backstop = _backstop(config, state)
    for item in e2e_items:
        entry = xfails[item.config_name].get(item.test_name)
        if entry is not None:
            item.xfail_entry = entry
            reason = f"{entry.reason} ({entry.where}; if it passes now, delete that line)"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=not entry.flaky, raises=E2EFailure))
        if budget_backstop:
            item.add_marker(pytest.mark.timeout(budget_backstop))
    _longest_first(config, items)


def pytest_collection_finish(session):
    """The final item order (after `-k`, `-m`, shards): how many hosts are still to come,
    which decides whether warming up a frontend before a fork pays off."""
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.close_prober()
        state.plan_hosts(session.items, getattr(session.config, "workerinput", {}).get("workercount", 1))


def _load_xfail_sets(state: E2EState, files: list[SuiteFile], every_file: bool = True) -> dict[str, dict]:
    """Each selected config's xfail set, validated against every suite file's tests (not
    only the selected ones, `-k` or not). When collection loaded only some files (a run of
    one file), or a file did not import, stale names cannot be told: they are not checked."""
    complete = every_file and all(f.broken is None and f.skip_reason is None for f in files)
    known = {name for f in files for name in f.tests} if complete else None
    try:
        return {
            name: load_xfails(name, known, state.xfail_dir, state.shape_mode, torch_cpu_capability())
            if state.xfail_dir
            else {}
            for name in state.configs
        }
    except XfailError as error:
        raise pytest.UsageError(
            f"{error}\nFix the lines above, or refresh the sets (README: 'Expected failures')."
        ) from None


def _backstop(config, state: E2EState) -> float | None:
    """pytest-timeout only guards the framework itself: our own limits end a pair, and the
    reducer and the golden run have their own; a pair never needs this much."""
    if not has_timeout(config):
        return None
    return 3 * state.budget + 2 * config.getoption("reduce_timeout") + 300


def _longest_first(config, items) -> None:
    """Order tests by their recorded duration, longest first (xdist hands out scopes in
    order), keeping each test's items together; unknown tests keep their place after."""
    durations = config.cache.get("e2e/durations", {}) if getattr(config, "cache", None) else {}
    if not durations:
        return
    order = {id(item): index for index, item in enumerate(items)}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(getattr(item, "test_name", item.nodeid), index)
    items.sort(
        key=lambda item: (
            -durations.get(getattr(item, "test_name", ""), 0.0),
            first[getattr(item, "test_name", item.nodeid)],
            order[id(item)],
        )
    )


# --- shards ------------------------------------------------------------------------------


class Sharder:
    """`--shard I/N`: keeps shard I's items, after every other plugin has chosen its items
    (`-k`, `-m`, `--lf`), so the shards split what this run would run. Under xdist each
    worker collects and computes the same plan."""

    def __init__(self, state: E2EState):
        self.state = state

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        spec = self.state.shard
        durations = _shard_durations(config)
        scopes = scopes_of(items)
        plan = shard_plan(scopes, spec.count, durations, [item.nodeid for item in items])
        keep = [item for item in items if plan.shard_of[scope_of(item.nodeid)] == spec.index]
        dropped = [item for item in items if plan.shard_of[scope_of(item.nodeid)] != spec.index]
        self.state.shard_summary = plan.summary(spec, len(keep), len(items), durations.source)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


def _shard_durations(config) -> Durations:
    path = config.getoption("shard_durations")
    if path:
        return Durations.from_results(path)
    cached = config.cache.get("e2e/durations", {}) if getattr(config, "cache", None) else {}
    return Durations(tests=dict(cached), source="pytest cache (e2e/durations)" if cached else "none")


def _shard_line(summary: dict) -> str:
    loads = ", ".join(f"{s:.0f}" for s in summary["estimated_s"])
    return (
        f"shard {summary['index']}/{summary['count']}: {summary['tests']} of {summary['total_tests']} tests, "
        f"{summary['items']} of {summary['total_items']} items (plan {summary['plan']}; durations from "
        f"{summary['durations']}, {summary['tests_with_durations']} tests known; estimated s per shard: {loads})"
    )


# --- scheduling --------------------------------------------------------------------------


@pytest.hookimpl(optionalhook=True)  # xdist's hooks: the plugin also runs under -p no:xdist
def pytest_configure_node(node):
    """A worker imports the suite files the controller probed without probing them again."""
    state = node.config.stash[STATE]
    if state.probed:
        node.workerinput["e2e_probed"] = clean_probes(state.probed)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """One scope per e2e test (`file::Test`), so its configs share one worker and host."""
    if config.getoption("dist") not in ("load", "loadgroup", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PerTestScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            parts = nodeid.split("::")
            return "::".join(parts[:2]) if len(parts) >= 3 else nodeid

    return PerTestScheduling(config, log)


# --- reporting ---------------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not isinstance(item, ResultItem) or item.result is None:
        return
    result = item.result
    # Travels to the xdist controller.
    report.user_properties.append(("e2e", {**result.to_json(), "rerun": item.rerun_command}))
    for key in ("stage", "signature", "ir_path", "repro_path", "shape_mode"):
        value = getattr(result, key)
        if value:
            item.user_properties.append((f"e2e_{key}", value))  # read by --junitxml
    if result.repro_path:
        item.add_report_section("call", "stdout", f"[[ATTACHMENT|{result.repro_path}]]\n")
    if result.outcome not in (PASS, SKIP) and result.error:
        item.add_report_section("call", "e2e error", result.error)


class RunRecorder:
    """Collects each pair's row as its report arrives (on the xdist controller too);
    registered per pytest config, so it needs no global state."""

    def __init__(self, state: E2EState):
        self.state = state

    def pytest_runtest_logreport(self, report):
        if self.state.record is None or report.when != "call":
            return
        for key, value in report.user_properties:
            if key == "e2e":
                final = report.outcome
                if hasattr(report, "wasxfail"):
                    final = "xpassed" if report.passed else "xfailed"
                self.state.record.add({**value, "final": final, "nodeid": report.nodeid})

    def pytest_keyboard_interrupt(self, excinfo):
        """A signal sent to the xdist controller alone (a CI job's timeout, `kill`) would
        leave each worker running its test to its end: pass it on, as a terminal's Ctrl-C
        does to the whole process group."""
        if _SIGNALLED and not self.state.is_worker and self.state.config.pluginmanager.has_plugin("dsession"):
            for pid in isolation.child_pids(os.getpid()):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def pytest_runtest_teardown(item, nextitem):
    state = item.config.stash[STATE]
    next_test = getattr(nextitem, "test_name", None)
    if state.host is not None and next_test != state.host.test.name:
        state.close_host()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    state = node.config.stash[STATE]
    if "e2e_peak_rss" in getattr(node, "workeroutput", {}):
        state.peaks[node.gateway.id] = tuple(node.workeroutput["e2e_peak_rss"])
    if "e2e_shard" in getattr(node, "workeroutput", {}):
        state.shard_summary = node.workeroutput["e2e_shard"]  # every worker computed the same plan


def _peak_rss(state: E2EState) -> tuple[float, float, float, str]:
    """This process's peak, its largest child's (any: hosts, import probes), and its
    largest test host's with that host's test."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    host, test = state.largest_host
    return own, max(children, host), host, test


def _hypothesis_ran(session) -> bool:
    """Whether a hypothesis test ran in this run: here (hypothesis is imported), or on a
    worker (its reports carry the hypothesis plugin's statistics or failing examples)."""
    if "hypothesis" in sys.modules:
        return True
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = (report for reports in getattr(reporter, "stats", {}).values() for report in reports)
    return any(key.startswith("_hypothesis") for report in reports for key in getattr(report, "__dict__", {}))


def pytest_sessionfinish(session, exitstatus):
    _INTERRUPT_ARRIVED.set()  # no signal is sent again once the session ends
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    state.close_host()
    state.close_spare()  # a run whose pairs all came from the result cache never adopted it
    if session.config.pluginmanager.has_plugin("hypothesispytest") and not _hypothesis_ran(session):
        # Its plugin has nothing to summarize; its summary would import hypothesis only to
        # find that out (1.3 s, a third of a one-pair run).
        session.config.pluginmanager.unregister(name="hypothesispytest")
    if not state.is_worker:
        state.frontend_cache.trim()
        state.program_cache.trim()
    if state.is_worker:
        session.config.workeroutput["e2e_peak_rss"] = _peak_rss(state)
        if state.shard_summary is not None:
            session.config.workeroutput["e2e_shard"] = state.shard_summary
        return
    if state.record is None:
        return
    if not state.peaks and state.record.rows:
        state.peaks["main"] = _peak_rss(state)
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or bool(_SIGNALLED)
    _save_durations(session.config, state.record.rows)
    shard = {"shard": state.shard_summary} if state.shard_summary is not None else {}
    if state.baseline is not None:
        state.baseline_diff = _baseline_diff(state)
    state.html_report = state.record.finish(
        "interrupted" if interrupted else "finished",
        tables=report_tables(state.record.rows),
        changes=state.baseline_diff.by_pair() if state.baseline_diff is not None else None,
        exit_status=int(exitstatus),
        **shard,
        peak_rss_mib={
            w: {"worker": round(o), "largest_child": round(c), "largest_host": round(h), "largest_host_test": t}
            for w, (o, c, h, t) in state.peaks.items()
        },
    )


def _save_durations(config, rows: list[dict]) -> None:
    """Each test's time over its configs, for `_longest_first` next run."""
    if getattr(config, "cache", None) is None or not rows:
        return
    per_test: dict[str, float] = {}
    for row in rows:
        if not row.get("cached"):
            per_test[row["test"]] = per_test.get(row["test"], 0.0) + row.get("duration", 0.0)
    durations = config.cache.get("e2e/durations", {})
    durations.update({name: round(seconds, 3) for name, seconds in per_test.items()})
    config.cache.set("e2e/durations", durations)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(STATE, None)
    if state is None or state.record is None or not state.record.rows:
        return
    terminalreporter.section("e2e summary")
    terminalreporter.write_line(summarize(state.record.rows))
    if state.shard_summary is not None:
        terminalreporter.write_line(_shard_line(state.shard_summary))
    if not state.isolate:  # said once, where -q still shows it
        terminalreporter.write_line(
            f"--no-isolation: every pair ran in this process; turned off: {NO_ISOLATION_TURNS_OFF}"
        )
    if state.peaks:
        peaks = ", ".join(
            f"{worker} {own:.0f} MiB (largest child {child:.0f} MiB; largest test host {host:.0f} MiB, {test or '-'})"
            for worker, (own, child, host, test) in sorted(state.peaks.items())
        )
        terminalreporter.write_line(f"peak memory per worker: {peaks}")
    terminalreporter.write_line(f"results: {state.reports_dir / 'results.json'} (run {state.record.run_id})")
    if state.html_report is not None:
        terminalreporter.write_line(f"html report: {state.html_report}")
    if state.baseline_diff is not None:
        from e2e.diff import format_report

        terminalreporter.section("e2e changes since the baseline")
        terminalreporter.write_line(
            f"baseline: {config.getoption('baseline')} ({sum(state.baseline_diff.base_pairs.values())} of its "
            f"{len(state.baseline)} pairs are of the tests and configs this run ran)"
        )
        terminalreporter.write_line(format_report(state.baseline_diff))


def _baseline_diff(state: E2EState):
    """`--baseline`: what changed since that run, for the tests and configs this run ran
    (a shard, `-k` or `--config` leave the rest of the baseline out)."""
    from e2e.diff import compare

    tests = {row["test"] for row in state.record.rows}
    configs = {row["config"] for row in state.record.rows}
    return compare(
        [row for row in state.baseline if row["test"] in tests and row["config"] in configs], state.record.rows
    )
