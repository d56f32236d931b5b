"""The pytest plugin of the e2e suite (installed as a `pytest11` entry point).

Each test registered by a suite file becomes one item per config,
`<file>::<TestName>::<config>`, so `-k tosa`, `-k "MmModule and linalg"`, `--lf`, `-x`,
`-n 2` and `--junitxml` work as usual. Suite directories come from `--e2e-suite DIR`
or the `e2e_suite` ini option (this repository's pyproject sets `e2e/test_suite`).

How a test runs: its module is built and its golden trace computed in a forked *test
host* (`e2e.framework.host`), which then runs each config under the pair's limits
(`--timeout`, `--memory-cap`); a pair that crashes the host leaves the rest to a new one.
The pytest process never runs a test's module, so nothing a test does can end the run.
Under xdist, the items of one test form one scheduling scope, so a test's configs run on
one worker and share its host. Expected failures come from `xfail/<config>[.static].txt`
and are strict: a test that passes fails and names the line to delete; one that fails
differently fails with both signatures.

This module is the entry point and the run's life (configure, session end); each role is
a plugin module of its own in `e2e.hooks`, registered with this one (`pytest_plugins`), and
keeps its state in an object under its own `config.stash` key: options, collection (and
the xfail sets; `ControllerProbes`), scheduling (shards: `Sharder`; xdist; durations),
reporting (`RunRecorder`: rows, peaks, baseline, summary) and the watchdog (SIGTERM).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

# First, before torch is imported: its exit handler runs after theirs (`e2e.quick_exit`).
from e2e import quick_exit  # isort: skip

from compiler.replay_runtime.target import ENV as JIT_TARGET_ENV  # noqa: E402
from e2e.framework import isolation
from e2e.host_pool import start_spare
from e2e.session import STATE, E2EState

# Registered right after this module, so their hooks keep this module's place among
# plugins. pytest imports them (each before those that import it): a module imported
# before pytest registers it as a plugin misses assertion rewriting, and pytest warns; so
# this module imports them only in its hooks.
pytest_plugins = [
    "e2e.hooks.options",
    "e2e.hooks.watchdog",
    "e2e.hooks.scheduling",
    "e2e.hooks.reporting",
    "e2e.hooks.collection",
]


def pytest_addhooks(pluginmanager):
    from e2e import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    # At registration, the plugin's earliest hook: the first host warms up from here on,
    # beside the rest of pytest's start (`HostPool.keep_spare` ends it if unneeded).
    start_spare()


def pytest_configure(config):
    from e2e.hooks import watchdog
    from e2e.hooks.collection import ControllerProbes
    from e2e.hooks.reporting import RunRecorder
    from e2e.hooks.scheduling import Sharder

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
    if (config.getoption("e2e_suite") or state.settings.opinfo_slice or state.settings.generate) and not _args_given(
        config
    ):
        config.args[:] = [str(p) for p in state.settings.suite_paths]  # `pytest --e2e-suite DIR` from anywhere
    if state.settings.is_worker:
        isolation.die_with_parent()
    # torch, torch-mlir and the project are loaded and live for the whole run: the garbage
    # collector need not walk their ~10^6 objects again (pytest's collections at the end
    # of a run took 0.4 s of a one-pair run). Forked hosts freeze again.
    gc.freeze()
    watchdog.install()
    config.pluginmanager.register(watchdog.WorkerSignals(config), "e2e-worker-signals")
    recorder = RunRecorder.configure(config, state)
    Sharder.configure(config)
    recorder.load_baseline()
    runs_pairs = (
        _runs_the_suite(config, state)
        and not config.option.collectonly
        and (state.settings.is_worker or not getattr(config.option, "numprocesses", None))
    )
    state.hosts.keep_spare(runs_pairs)
    if _runs_the_suite(config, state) and not state.settings.is_worker and not config.option.collectonly:
        ControllerProbes.configure(config, state)
        recorder.start()


def _args_given(config) -> bool:
    source = getattr(config, "args_source", None)
    return source is not None and source.name == "ARGS"


def _runs_the_suite(config, state: E2EState) -> bool:
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if any(path == s or s.is_relative_to(path) or path.is_relative_to(s) for s in state.settings.suite_paths):
            return True
    return False


def pytest_sessionfinish(session, exitstatus):
    from e2e.hooks import reporting, watchdog

    watchdog.session_ended()
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    state.hosts.close_host()
    state.hosts.close_spare()  # a run whose pairs all came from the result cache never adopted it
    # Under xdist execnet's exit handler (registered before `quick_exit`'s) stops the gateways.
    if (
        _runs_the_suite(session.config, state)
        and not state.settings.is_worker
        and not getattr(session.config.option, "numprocesses", None)
        and quick_exit.is_the_command(session.config.invocation_params.args)
    ):
        quick_exit.arm(session)
    reporting.drop_idle_hypothesis(session)
    if not state.settings.is_worker:
        state.caches.frontend.trim()
        state.caches.programs.trim()
    recorder = session.config.stash.get(reporting.RECORDER, None)
    if recorder is not None:
        recorder.finish(session, exitstatus)
