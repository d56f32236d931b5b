"""The pytest plugin of the e2e suite.

Each test registered by a file in `e2e/test_suite/` becomes one item per config,
named `<TestName>[<config>]`, so `-k tosa`, `-k "MmModule and linalg"`, `--lf`, `-x`,
`-n 2` and `--junitxml` work as usual. Expected failures come from
`e2e/configs/xfail/<config>.txt` and are strict: a test that starts passing fails
and names the line to delete.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import resource
import sys
import traceback
from pathlib import Path

import pytest

from e2e.configs import CONFIG_NAMES, XFAIL_DIR, XfailError, load_config, load_xfails, xfail_path
from e2e.framework.registry import GLOBAL_TEST_REGISTRY, RegistryError
from e2e.framework.report import failure_text, summarize, write_results
from e2e.framework.result import SHAPE_MODES, SKIP, Result
from e2e.framework.runner import PreparedCache, run_pair

ROOT = Path(__file__).parent
_TESTS_BY_FILE: dict[Path, list[str]] = {}
_PREPARED = PreparedCache()


def pytest_addhooks(pluginmanager):
    from e2e import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    group = parser.getgroup("e2e", "PyTorch -> MLIR e2e suite")
    group.addoption(
        "--config",
        action="append",
        default=[],
        help=f"configs to run, comma separated or repeated (default: all of {', '.join(CONFIG_NAMES)})",
    )
    group.addoption("--reports-dir", default=str(ROOT / "reports"), help="where results, IR and reproducers go")
    group.addoption(
        "--suite-dir",
        default=str(ROOT / "e2e" / "test_suite"),
        help="directory whose *.py files register the e2e tests (default: e2e/test_suite)",
    )
    group.addoption("--xfail-dir", default=str(XFAIL_DIR), help="directory of the <config>.txt xfail sets")
    group.addoption(
        "--no-isolation",
        action="store_true",
        help="compile and run in the pytest process (for pdb; a crash then ends the run)",
    )
    group.addoption(
        "--shapes",
        choices=SHAPE_MODES,
        default="annotated",
        help="annotated: `-1` dims of annotate_args are dynamic (default); static: the example inputs' shapes, as upstream",
    )
    group.addoption("--no-reduce", action="store_true", help="do not write reproducer bundles for failures")
    group.addoption(
        "--reduce-timeout", type=float, default=60.0, help="time box of the reducer per failure, seconds (default 60)"
    )
    group.addoption("--reduce-xfailed", action="store_true", help="write bundles for expected failures too")


def pytest_configure(config):
    if not config.getoption("no_reduce", True):
        from e2e.reducer.plugin import ReducerPlugin

        plugin = ReducerPlugin(
            Path(config.getoption("reports_dir")),
            config.getoption("reduce_timeout"),
            config.getoption("reduce_xfailed"),
        )
        config.pluginmanager.register(plugin, "e2e-reducer")
        if _runs_the_suite(config):  # `pytest tests` must not wipe the bundles of a suite run
            plugin.clear_stale_bundles(config)


def _runs_the_suite(config) -> bool:
    suite = Path(config.getoption("suite_dir")).resolve()
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == suite or suite.is_relative_to(path) or path.is_relative_to(suite):
            return True
    return False


def selected_configs(config) -> list[str]:
    names = [n.strip() for opt in config.getoption("config") for n in opt.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIG_NAMES]
    if unknown:
        raise pytest.UsageError(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIG_NAMES)}")
    return names or list(CONFIG_NAMES)


def suite_dir(config) -> Path:
    return Path(config.getoption("suite_dir")).resolve()


def import_suite_file(path: Path) -> list[str]:
    """Import one test_suite file; the names of the tests it registered."""
    if path not in _TESTS_BY_FILE:
        before = set(GLOBAL_TEST_REGISTRY)
        if path.parent == ROOT / "e2e" / "test_suite":
            importlib.import_module(f"e2e.test_suite.{path.stem}")
        else:  # a suite of the user's own, outside the package
            spec = importlib.util.spec_from_file_location(f"e2e_user_suite.{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        _TESTS_BY_FILE[path] = [n for n in GLOBAL_TEST_REGISTRY if n not in before]
    return _TESTS_BY_FILE[path]


@functools.cache
def _suite_files(directory: Path) -> tuple[Path, ...]:
    return tuple(p for p in sorted(directory.glob("*.py")) if p.name != "__init__.py")


def suite_files(config) -> tuple[Path, ...]:
    return _suite_files(suite_dir(config))


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".py" and file_path.resolve() in suite_files(parent.config):
        return E2EFile.from_parent(parent, path=file_path)
    return None


class E2EFile(pytest.File):
    def collect(self):
        try:
            names = import_suite_file(self.path)
        except (Exception, RegistryError):
            yield BrokenFileItem.from_parent(self, name="import", error=traceback.format_exc())
            return
        configs = selected_configs(self.config)
        for name in names:
            for config in configs:
                item = E2EItem.from_parent(self, name=f"{name}[{config}]", test_name=name, config_name=config)
                item.add_marker(pytest.mark.xdist_group(name))
                for mark in GLOBAL_TEST_REGISTRY[name].marks:
                    item.add_marker(getattr(pytest.mark, mark))
                yield item


class BrokenFileItem(pytest.Item):
    """A test_suite file that does not import: reported as a failure, the run goes on."""

    def __init__(self, *, error: str, **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self):
        raise E2EError(f"{self.path} could not be imported; its tests did not run:\n{self.error}")

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::import"


class E2EError(Exception):
    pass


class E2EFailure(Exception):
    def __init__(self, result: Result):
        super().__init__(result.error)
        self.result = result


def _child_timeout(item) -> float:
    """The per-pair deadline: pytest-timeout's own setting, less a margin to report in."""
    marker = item.get_closest_marker("timeout")
    value = (marker.args[0] if marker and marker.args else None) or item.config.getoption("timeout", None)
    value = float(value or item.config.getini("timeout") or 300)
    return max(1.0, value * 0.9) if value > 0 else 3600.0


class E2EItem(pytest.Item):
    def __init__(self, *, test_name: str, config_name: str, **kwargs):
        super().__init__(**kwargs)
        self.test_name = test_name
        self.config_name = config_name
        self.result: Result | None = None

    def runtest(self):
        test = GLOBAL_TEST_REGISTRY[self.test_name]
        prepared = _PREPARED.get(test)
        prepared.shape_mode = self.config.getoption("shapes")
        self.result = run_pair(
            prepared,
            load_config(self.config_name),
            reports_dir=Path(self.config.getoption("reports_dir")),
            timeout=_child_timeout(self),
            isolate=not self.config.getoption("no_isolation"),
        )
        self.result.shape_mode = prepared.shape_mode
        if self.result.outcome == SKIP:
            pytest.skip(f"{self.config_name} cannot run {self.test_name} as asked: {self.result.error}")
        self.ihook.pytest_e2e_after_result(item=self, prepared=prepared, result=self.result)
        if not self.result.passed:
            raise E2EFailure(self.result)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, E2EFailure):
            return failure_text(excinfo.value.result, self.nodeid)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.test_name} on {self.config_name}"


def pytest_collection_modifyitems(session, config, items):
    e2e_items = [i for i in items if isinstance(i, E2EItem)]
    if not e2e_items:
        return
    for path in suite_files(config):
        try:
            import_suite_file(path)
        except Exception:
            pass  # reported by that file's BrokenFileItem when collected
    known = set(GLOBAL_TEST_REGISTRY)
    xfails = {}
    xfail_dir = Path(config.getoption("xfail_dir"))
    try:
        for name in selected_configs(config):
            xfails[name] = load_xfails(name, known, xfail_dir)
    except XfailError as error:
        raise pytest.UsageError(str(error)) from None
    for item in e2e_items:
        entry = xfails[item.config_name].get(item.test_name)
        if entry is not None:
            where = f"{_relative(xfail_path(item.config_name, xfail_dir))}:{entry.line}"
            reason = f"{entry.reason} ({where}; if it passes now, delete that line)"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=E2EFailure))


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(ROOT)
    except ValueError:
        return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not isinstance(item, E2EItem) or item.result is None:
        return
    result = item.result
    report.user_properties.append(("e2e", result.to_json()))  # for the summary (travels with xdist)
    for key in ("stage", "signature", "ir_path", "repro_path"):
        value = getattr(result, key)
        if value:
            # item.user_properties reach the teardown report, which --junitxml reads.
            item.user_properties.append((f"e2e_{key}", value))
    if result.repro_path:
        # The Jenkins/GitLab attachment convention, read from the JUnit system-out.
        item.add_report_section("call", "stdout", f"[[ATTACHMENT|{result.repro_path}]]\n")


_ROWS: list[dict] = []
_PEAK_RSS: dict[str, tuple[float, float]] = {}  # worker -> (own MiB, largest child MiB)


def _peak_rss() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, child


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["e2e_peak_rss"] = _peak_rss()
    elif not _PEAK_RSS and _ROWS:
        _PEAK_RSS["main"] = _peak_rss()


def pytest_testnodedown(node, error):
    if "e2e_peak_rss" in getattr(node, "workeroutput", {}):
        _PEAK_RSS[node.gateway.id] = tuple(node.workeroutput["e2e_peak_rss"])


def pytest_runtest_logreport(report):
    # Runs on the controller too under xdist: the user properties travel with the report.
    for key, value in report.user_properties:
        if key == "e2e" and report.when == "call":
            final = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            if hasattr(report, "wasxfail") and report.passed:
                final = "xpassed"
            _ROWS.append({**value, "final": final})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _ROWS or hasattr(config, "workerinput"):
        return
    terminalreporter.section("e2e summary")
    terminalreporter.write_line(summarize(_ROWS))
    if _PEAK_RSS:
        peaks = ", ".join(
            f"{worker} {own:.0f} MiB (largest child {child:.0f} MiB)" for worker, (own, child) in sorted(_PEAK_RSS.items())
        )
        terminalreporter.write_line(f"peak memory per worker: {peaks}")
    path = Path(config.getoption("reports_dir")) / "results.json"
    write_results(_ROWS, path)
    terminalreporter.write_line(f"results: {path}")
