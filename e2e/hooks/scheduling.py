"""Which process runs which test, in which order: `--shard I/N`, the xdist scheduler
(one scope per test), tests longest first by their recorded durations, and one test host
per test."""

from __future__ import annotations

import pytest

from e2e.framework.shards import Durations, ShardSpec, scope_of, scopes_of
from e2e.framework.shards import plan as shard_plan
from e2e.session import STATE

DURATIONS_KEY = "e2e/durations"  # pytest's cache: each test's seconds over its configs, last run


class Sharder:
    """`--shard I/N`: keeps shard I's items, after every other plugin has chosen its items
    (`-k`, `-m`, `--lf`), so the shards split what this run would run. Under xdist each
    worker collects and computes the same plan, and hands it to the controller."""

    def __init__(self, spec: ShardSpec):
        self.spec = spec
        self.summary: dict | None = None  # this shard's plan, for run.json and the e2e summary

    @classmethod
    def configure(cls, config: pytest.Config) -> Sharder | None:
        """`--shard` and `--shard-durations`, checked before anything runs; the sharder,
        registered, under `SHARDER`."""
        from e2e.framework.results_files import ResultsError, results_file

        sharder = None
        if config.getoption("shard"):
            try:
                sharder = cls(ShardSpec.parse(config.getoption("shard")))
            except ValueError as error:
                raise pytest.UsageError(str(error)) from None
            config.stash[SHARDER] = sharder
            config.pluginmanager.register(sharder, "e2e-sharder")
        elif config.getoption("shard_durations"):
            raise pytest.UsageError("--shard-durations is for --shard I/N")
        if config.getoption("shard_durations"):
            try:
                results_file(config.getoption("shard_durations"))
            except ResultsError as error:
                raise pytest.UsageError(f"--shard-durations: {error}") from None
        return sharder

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        durations = _shard_durations(config)
        scopes = scopes_of(items)
        plan = shard_plan(scopes, self.spec.count, durations, [item.nodeid for item in items])
        keep = [item for item in items if plan.shard_of[scope_of(item.nodeid)] == self.spec.index]
        dropped = [item for item in items if plan.shard_of[scope_of(item.nodeid)] != self.spec.index]
        self.summary = plan.summary(self.spec, len(keep), len(items), durations.source)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_sessionfinish(self, session, exitstatus):
        if hasattr(session.config, "workerinput") and self.summary is not None:
            session.config.workeroutput["e2e_shard"] = self.summary

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        if "e2e_shard" in getattr(node, "workeroutput", {}):
            self.summary = node.workeroutput["e2e_shard"]  # every worker computed the same plan

    def line(self) -> str:
        """The plan, in one line of the e2e summary."""
        summary = self.summary
        loads = ", ".join(f"{s:.0f}" for s in summary["estimated_s"])
        return (
            f"shard {summary['index']}/{summary['count']}: {summary['tests']} of {summary['total_tests']} tests, "
            f"{summary['items']} of {summary['total_items']} items (plan {summary['plan']}; durations from "
            f"{summary['durations']}, {summary['tests_with_durations']} tests known; estimated s per shard: {loads})"
        )


SHARDER = pytest.StashKey[Sharder]()


def _shard_durations(config) -> Durations:
    path = config.getoption("shard_durations")
    if path:
        return Durations.from_results(path)
    cached = config.cache.get(DURATIONS_KEY, {}) if getattr(config, "cache", None) else {}
    return Durations(tests=dict(cached), source=f"pytest cache ({DURATIONS_KEY})" if cached else "none")


def longest_first(config: pytest.Config, items: list) -> None:
    """Order tests by their recorded duration, longest first (xdist hands out scopes in
    order), keeping each test's items together; unknown tests keep their place after."""
    durations = config.cache.get(DURATIONS_KEY, {}) if getattr(config, "cache", None) else {}
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


def save_durations(config: pytest.Config, rows: list[dict]) -> None:
    """Each test's time over its configs, for `longest_first` next run."""
    if getattr(config, "cache", None) is None or not rows:
        return
    per_test: dict[str, float] = {}
    for row in rows:
        if not row.get("cached"):
            per_test[row["test"]] = per_test.get(row["test"], 0.0) + row.get("duration", 0.0)
    durations = config.cache.get(DURATIONS_KEY, {})
    durations.update({name: round(seconds, 3) for name, seconds in per_test.items()})
    config.cache.set(DURATIONS_KEY, durations)


def pytest_collection_finish(session):
    """The final item order (after `-k`, `-m`, shards): how many hosts are still to come,
    which decides whether warming up a frontend before a fork pays off."""
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.suite.close_prober()
        state.hosts.plan_hosts(session.items, getattr(session.config, "workerinput", {}).get("workercount", 1))


@pytest.hookimpl(optionalhook=True)  # xdist's hooks: the plugin also runs under -p no:xdist
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


def pytest_runtest_teardown(item, nextitem):
    # A test's host serves its configs, which run one after another: after the last, it
    # waits for the next test (or is closed).
    state = item.config.stash[STATE]
    next_test = getattr(nextitem, "test_name", None)
    if state.hosts.host is not None and next_test != state.hosts.host.test.name:
        if next_test is None:
            state.hosts.close_host()
        else:
            state.hosts.end_host()
