"""Collection: suite files become `E2EFile`s (a collector per test, an item per config),
and each item gets its expected failure from the xfail sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.collect import E2EFailure, E2EFile, E2EItem
from e2e.configs import XfailError, load_xfails
from e2e.framework.platform import torch_cpu_capability
from e2e.framework.suite_files import SuiteFile, clean_probes, load_suite
from e2e.hooks.scheduling import longest_first
from e2e.session import STATE, E2EState
from e2e.settings import has_timeout


class ControllerProbes:
    """Under xdist, the controller's import probes of every suite file: a worker's collection
    error reaches the controller as an opaque INTERNALERROR, so the controller checks the
    xfail sets first, from the test names the probes report; the workers then import the
    files without probing them again."""

    def __init__(self, files: dict[Path, SuiteFile]):
        self.files = files

    @classmethod
    def configure(cls, config: pytest.Config, state: E2EState) -> None:
        """Probe and check, on an xdist controller with xfail sets; kept under `PROBES`."""
        if getattr(config.option, "numprocesses", None) and state.settings.xfail_dir:
            probes = cls(
                load_suite(
                    state.settings.suite_paths, state.settings.import_limits, register=False, probes=state.caches.probes
                )
            )
            load_xfail_sets(state, list(probes.files.values()))
            config.stash[PROBES] = probes


PROBES = pytest.StashKey[ControllerProbes]()


@pytest.hookimpl(optionalhook=True)  # xdist's hook: the plugin also runs under -p no:xdist
def pytest_configure_node(node):
    """A worker imports the suite files the controller probed without probing them again."""
    probes = node.config.stash.get(PROBES, None)
    if probes is not None and probes.files:
        node.workerinput["e2e_probed"] = clean_probes(probes.files)


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
    if any(resolved == suite or resolved in suite.parents for suite in state.settings.suite_paths):
        return pytest.Dir.from_parent(parent, path=path)
    return None


def pytest_collect_file(file_path: Path, parent):
    state = parent.config.stash[STATE]
    if file_path.suffix == ".py" and file_path.resolve() in state.settings.suite_files:
        if not _python_plugin_takes(file_path, parent):
            return E2EFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    # A suite file named test_*.py, or given on the command line, is ours, not a Module.
    state = parent.config.stash[STATE]
    if module_path.resolve() in state.settings.suite_files:
        return E2EFile.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(session, config, items):
    state = config.stash[STATE]
    e2e_items = [i for i in items if isinstance(i, E2EItem)]
    if not e2e_items:
        return
    xfails = load_xfail_sets(
        state, list(state.suite.loaded.values()), every_file=set(state.suite.loaded) >= state.settings.suite_files
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
    longest_first(config, items)


def load_xfail_sets(state: E2EState, files: list[SuiteFile], every_file: bool = True) -> dict[str, dict]:
    """Each selected config's xfail set, validated against every suite file's tests (not
    only the selected ones, `-k` or not). When collection loaded only some files (a run of
    one file), or a file did not import, stale names cannot be told: they are not checked."""
    complete = every_file and all(f.broken is None and f.skip_reason is None for f in files)
    known = {name for f in files for name in f.tests} if complete else None
    try:
        return {
            name: load_xfails(name, known, state.settings.xfail_dir, state.settings.shape_mode, torch_cpu_capability())
            if state.settings.xfail_dir
            else {}
            for name in state.settings.configs
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
    return 3 * state.settings.budget + 2 * config.getoption("reduce_timeout") + 300
