"""Reporting: each pair's row on its report (for the xdist controller and `--junitxml`),
the run's reports directory (results, HTML), peak memory, the e2e summary and the changes
since `--baseline`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.replay_runtime.target import jit_target
from e2e.collect import ResultItem
from e2e.framework.isolation import GIB
from e2e.framework.platform import cpu_description, torch_cpu_capability
from e2e.framework.result import PASS, SKIP
from e2e.framework.run_record import ReportsDirBusy, RunRecord, WorkerClock
from e2e.framework.run_summary import header_lines, hung_once, summarize
from e2e.hooks import watchdog
from e2e.hooks.scheduling import SHARDER, save_durations
from e2e.session import STATE, E2EState
from e2e.settings import NO_ISOLATION_TURNS_OFF
from e2e.tools.report_tables import report_tables


class RunRecorder:
    """The run's record: each pair's row as its report arrives (on the xdist controller
    too), the workers' peak memory, the baseline and what changed since it; registered per
    pytest config, so it needs no global state."""

    def __init__(self, config: pytest.Config, state: E2EState):
        self.config = config
        self.state = state
        self.record: RunRecord | None = None  # the reports directory, on the controller of a suite run
        self.peaks: dict[str, tuple] = {}  # worker -> (own MiB, largest child MiB, largest host MiB, its test)
        self.baseline: list[dict] | None = None  # --baseline: the earlier run's rows
        self.baseline_diff = None  # an e2e.tools.diff.Diff from the baseline to this run, once it finished
        self.html_report: Path | None = None
        self.clock = WorkerClock()  # this process's time: start, its items, its pairs
        self.clocks: dict[str, dict] = {}  # worker -> its `WorkerClock.summary()`
        self.service_line: str | None = None  # --e2e-service: what the upload did

    @classmethod
    def configure(cls, config: pytest.Config, state: E2EState) -> RunRecorder:
        """The recorder, registered, under `RECORDER`."""
        recorder = cls(config, state)
        config.stash[RECORDER] = recorder
        config.pluginmanager.register(recorder, "e2e-run-recorder")
        return recorder

    def load_baseline(self) -> None:
        """`--baseline`, checked before anything runs (and read on the controller)."""
        from e2e.framework.results_files import ResultsError, load_rows, results_file

        path = self.config.getoption("baseline")
        if not path:
            return
        try:
            results_file(path)
            if not self.state.settings.is_worker:
                self.baseline = load_rows(path)[0]
        except ResultsError as error:
            raise pytest.UsageError(f"--baseline: {error}") from None

    def start(self) -> None:
        """Claim the reports directory for this run."""
        self.record = RunRecord(self.state.settings.reports_dir, run_meta(self.config, self.state))
        try:
            self.record.start()
        except ReportsDirBusy as error:
            self.record = None
            raise pytest.UsageError(str(error)) from None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.clock.item_starts()
        yield
        self.clock.item_ends()

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        if getattr(report, "node", None) is None:  # this process ran it (on a controller, a worker did)
            self.clock.pair_seconds += sum(v.get("duration") or 0.0 for k, v in report.user_properties if k == "e2e")
        if self.record is None:
            return
        for key, value in report.user_properties:
            if key == "e2e":
                final = report.outcome
                if hasattr(report, "wasxfail"):
                    final = "xpassed" if report.passed else "xfailed"
                self.record.add({**value, "final": final, "nodeid": report.nodeid})

    @pytest.hookimpl(optionalhook=True)  # xdist's hook: the plugin also runs under -p no:xdist
    def pytest_testnodedown(self, node, error):
        if "e2e_peak_rss" in getattr(node, "workeroutput", {}):
            self.peaks[node.gateway.id] = tuple(node.workeroutput["e2e_peak_rss"])
        if "e2e_clock" in getattr(node, "workeroutput", {}):
            self.clocks[node.gateway.id] = node.workeroutput["e2e_clock"]

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """At the session's end: a worker hands its peak memory to the controller; the
        controller writes the durations, the changes since the baseline and the reports."""
        if self.state.settings.is_worker:
            session.config.workeroutput["e2e_peak_rss"] = _peak_rss(self.state)
            session.config.workeroutput["e2e_clock"] = self.clock.summary()
            return
        if self.record is None:
            return
        if not self.peaks and self.record.rows:
            self.peaks["main"] = _peak_rss(self.state)
        if not self.clocks and self.record.rows:
            self.clocks["main"] = self.clock.summary()
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or watchdog.signalled()
        save_durations(session.config, self.record.rows)
        sharder = session.config.stash.get(SHARDER, None)
        shard = {"shard": sharder.summary} if sharder is not None and sharder.summary is not None else {}
        if self.baseline is not None:
            self.baseline_diff = self._baseline_diff()
        self.html_report = self.record.finish(
            "interrupted" if interrupted else "finished",
            tables=report_tables(self.record.rows),
            changes=self.baseline_diff.by_pair() if self.baseline_diff is not None else None,
            exit_status=int(exitstatus),
            hung_once=hung_once(self.record.rows),
            **shard,
            peak_rss_mib={
                w: {"worker": round(o), "largest_child": round(c), "largest_host": round(h), "largest_host_test": t}
                for w, (o, c, h, t) in self.peaks.items()
            },
            worker_seconds=dict(sorted(self.clocks.items())),
        )
        if self.config.getoption("e2e_service"):
            self.service_line = self._upload(self.config.getoption("e2e_service"))

    def _upload(self, url: str) -> str:
        """`--e2e-service URL`: the finished run, its bugs and bundles, sent to the service."""
        from e2e.service.client import UploadFailed, first_seen, read_token, upload
        from e2e.service.reports import UploadError

        token = read_token(None, self.config.getoption("e2e_service_token_file"))
        try:
            done = upload(self.state.settings.reports_dir, url, token, self.config.getoption("e2e_service_label"))
        except (UploadFailed, UploadError) as error:
            return f"NOT uploaded: {error}"
        if not done["created"]:
            return f"{url}/runs/{done['run_id']}: this run was already there"
        return (
            f"{url}/runs/{done['run_id']}: {done['pairs']} pairs, {first_seen(done)}, "
            f"{len(done['seen_bugs'])} seen before, {len(done['reopened'])} reopened, {len(done['fixed'])} fixed"
        )

    def _baseline_diff(self):
        """`--baseline`: what changed since that run, for the tests and configs this run ran
        (a shard, `-k` or `--config` leave the rest of the baseline out)."""
        from e2e.tools.diff import compare

        tests = {row["test"] for row in self.record.rows}
        configs = {row["config"] for row in self.record.rows}
        return compare(
            [row for row in self.baseline if row["test"] in tests and row["config"] in configs], self.record.rows
        )

    def write_summary(self, terminalreporter) -> None:
        """The e2e summary, and the changes since the baseline."""
        if self.record is None or not self.record.rows:
            return
        terminalreporter.section("e2e summary")
        terminalreporter.write_line(summarize(self.record.rows))
        sharder = self.config.stash.get(SHARDER, None)
        if sharder is not None and sharder.summary is not None:
            terminalreporter.write_line(sharder.line())
        if not self.state.settings.isolate:  # said once, where -q still shows it
            terminalreporter.write_line(
                f"--no-isolation: every pair ran in this process; turned off: {NO_ISOLATION_TURNS_OFF}"
            )
        if self.peaks:
            peaks = ", ".join(
                f"{worker} {own:.0f} MiB (largest child {child:.0f} MiB; largest test host {host:.0f} MiB, "
                f"{test or '-'})"
                for worker, (own, child, host, test) in sorted(self.peaks.items())
            )
            terminalreporter.write_line(f"peak memory per worker: {peaks}")
        terminalreporter.write_line(
            f"results: {self.state.settings.reports_dir / 'results.json'} (run {self.record.run_id})"
        )
        if self.html_report is not None:
            terminalreporter.write_line(f"html report: {self.html_report}")
        if self.service_line is not None:
            terminalreporter.write_line(f"reproducer service: {self.service_line}")
        if self.baseline_diff is not None:
            from e2e.tools.diff import format_report

            terminalreporter.section("e2e changes since the baseline")
            terminalreporter.write_line(
                f"baseline: {self.config.getoption('baseline')} ({sum(self.baseline_diff.base_pairs.values())} of "
                f"its {len(self.baseline)} pairs are of the tests and configs this run ran)"
            )
            terminalreporter.write_line(format_report(self.baseline_diff))


RECORDER = pytest.StashKey[RunRecorder]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not isinstance(item, ResultItem) or item.result is None:
        return
    result = item.result
    row = result.to_json()
    # Travels to the xdist controller.
    report.user_properties.append(("e2e", {**row, "rerun": item.rerun_command}))
    for key in ("stage", "signature", "ir_path", "repro_path", "shape_mode"):
        if row[key]:
            item.user_properties.append((f"e2e_{key}", row[key]))  # read by --junitxml
    if result.repro_path:
        item.add_report_section("call", "stdout", f"[[ATTACHMENT|{result.repro_path}]]\n")
    if result.outcome not in (PASS, SKIP) and result.error:
        item.add_report_section("call", "e2e error", result.error)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    recorder = config.stash.get(RECORDER, None)
    if recorder is not None:
        recorder.write_summary(terminalreporter)


def pytest_report_header(config):
    state = config.stash.get(STATE, None)
    if state is None or not state.settings.suite_paths:
        return None
    return header_lines(run_meta(config, state), state.settings.suite_paths, state.settings.reports_dir)


def run_meta(config: pytest.Config, state: E2EState) -> dict:
    """What a run's results hold true for: its command, configs, versions and machine."""
    import torch
    import torch_mlir

    from e2e.framework.provenance import provenance

    sharder = config.stash.get(SHARDER, None)
    return {
        "command": " ".join(sys.argv),
        "configs": list(state.settings.configs),
        "shape_mode": state.settings.shape_mode,
        "torch": f"{torch.__version__} ({Path(torch.__file__).parent})",
        "torch_mlir": f"{_version('torch-mlir')} ({next(iter(torch_mlir.__path__))})",
        "platform": torch_cpu_capability(),
        "cpu": cpu_description(),
        "jit_target": jit_target().name,
        **provenance(),
        "budget_s": state.settings.budget,
        "memory_cap_gib": state.settings.memory_cap / GIB if state.settings.memory_cap else None,
        **({"shard": {"index": sharder.spec.index, "count": sharder.spec.count}} if sharder is not None else {}),
    }


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def _peak_rss(state: E2EState) -> tuple[float, float, float, str]:
    """This process's peak, its largest child's (any: hosts, import probes), and its
    largest test host's with that host's test."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    host, test = state.hosts.largest_host
    return own, max(children, host), host, test


def drop_idle_hypothesis(session: pytest.Session) -> None:
    """Hypothesis's plugin has nothing to summarize when no hypothesis test ran: its summary
    would import hypothesis only to find that out (1.3 s, a third of a one-pair run)."""
    if session.config.pluginmanager.has_plugin("hypothesispytest") and not _hypothesis_ran(session):
        session.config.pluginmanager.unregister(name="hypothesispytest")


def _hypothesis_ran(session) -> bool:
    """Whether a hypothesis test ran in this run: here (hypothesis is imported), or on a
    worker (its reports carry the hypothesis plugin's statistics or failing examples)."""
    if "hypothesis" in sys.modules:
        return True
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = (report for reports in getattr(reporter, "stats", {}).values() for report in reports)
    return any(key.startswith("_hypothesis") for report in reports for key in getattr(report, "__dict__", {}))
