"""The test hosts of one pytest process (`HostPool`): the spare host forked before its test is
known, the warm-ups the hosts inherit, each test's host and its lifetime, and where a pair
runs (its test's host, or with --no-isolation this process)."""

from __future__ import annotations

import functools
import gc
import os
import threading

from compiler.frontends import load_frontend
from e2e.configs import CONFIG_NAMES, Preloads, WarmsUp, load_config
from e2e.framework import isolation
from e2e.framework.cache import FrontendCache, ProgramCache
from e2e.framework.host import SpareHost, TestHost
from e2e.framework.isolation import Limits
from e2e.framework.prepared import PreparedCache
from e2e.framework.result import Result
from e2e.framework.runner import run_pair
from e2e.settings import Settings

WARM_UP_PAYS_FROM = 2  # tests still to start (this one included) for a warm-up to pay off
# Probes of a collection after which it warms up meanwhile: a run of one file probes one.
WARM_WHILE_PROBING_FROM = 2
# `E2E_SPARE_HOST=0`: no spare host (to measure what it saves on this machine; docs/running.md).
SPARE_ENV = "E2E_SPARE_HOST"


class HostPool:
    """Where this process's pairs run: a host per test (the spare adopted first, a host handed
    to the next test when it ended cleanly), the warm-ups forked hosts inherit, and with
    --no-isolation this process itself. Its state is written by its own methods alone."""

    def __init__(self, settings: Settings, frontend_cache: FrontendCache, program_cache: ProgramCache):
        self.settings = settings
        self.frontend_cache = frontend_cache
        self.program_cache = program_cache
        self.captured = False  # a host paid a frontend's initialization itself: warm up before the next one
        self.tests_ahead: dict[str, float] = {}  # test -> the tests this process runs from it on (`plan_hosts`)
        self.host_configs: dict[str, set[str]] = {}  # test -> the configs of its items (`plan_hosts`)
        self.warming: threading.Thread | None = None  # the warm-up while probing (`start_warming`)
        self._collected = threading.Event()  # collection is over: the warm-up while probing stops
        self.spare: SpareHost | None = None  # the first host, forked early (`keep_spare`)
        self.prepared = PreparedCache()  # --no-isolation only
        self.host: TestHost | None = None
        self.largest_host: tuple[float, str] = (0.0, "")  # MiB, test

    def warms_while_probing(self, probed: int) -> bool:
        """Whether this process warms up now, collection having probed `probed` files: it runs
        pairs itself (not an xdist controller), in hosts, has not begun, and probes more than one file."""
        option = self.settings.config.option
        return (
            probed >= WARM_WHILE_PROBING_FROM
            and self.settings.isolate
            and self.warming is None
            and (self.settings.is_worker or not getattr(option, "numprocesses", None))
            and not option.collectonly
        )

    def start_warming(self) -> None:
        """The warm-ups every host forked later inherits (`preload`, `warm_up_capture`), in
        a thread, while this process only waits for the probe child: a collection that
        probes many files (`-k` across the suite, no cache) waits for seconds, the warm-up
        then costs no wall time. The thread is joined before any fork (`join_warming`): a
        child forked while it imports would inherit held locks; and before a suite file is
        imported here (`SuiteLoader.test`)."""
        specs = tuple(self.settings.configs.values())

        def warm() -> None:
            # Only what every host of the run pays (imports, the FX capture's initialization),
            # about as long as probing the suite takes: what it has not finished when the
            # first host forks, that host waits for.
            for spec in specs:
                if isinstance(config := load_config(spec), Preloads):
                    preload(config)
            for warm_capture in capture_warm_ups(specs):
                try:
                    warm_capture()
                except Exception:  # noqa: BLE001 - a frontend that cannot warm up fails in its pairs
                    pass
            # Then, while the probes still leave this core idle, each config's own warm-up
            # (the backends' first compiles: every host's first pairs paid them again); the
            # first host waits for the one under way, no more.
            for spec in specs:
                if self._collected.is_set():
                    break
                warm_up_config(spec)

        self.warming = threading.Thread(target=warm, name="e2e-warm-up", daemon=True)
        _WARMING.append(self.warming)
        self.warming.start()
        # This process is now warmed up for every host it forks: a spare's warm-up would be
        # the same work twice, on a core the probes and this thread need.
        self.close_spare()

    def collection_ended(self) -> None:
        """The warm-up while probing stops after the config it is warming."""
        self._collected.set()

    def run_pair(self, test, config: str, limits: Limits, *, diagnose: bool = True) -> Result:
        """Where a pair runs, decided here alone: on its test's host, where a crash, hang or
        runaway allocation ends only the pair; with --no-isolation, in this process.
        `diagnose`: record what a host that times out was doing (not for an expected hang)."""
        settings = self.settings
        if settings.isolate:
            result = self.host_for(test).run(config, settings.reports_dir, limits, diagnose=diagnose)
            loaded = load_config(settings.configs[config])
            if isinstance(loaded, WarmsUp) and loaded.host_paid_warm_up(result):
                self.captured = True  # later hosts would pay it too
            return result
        prepared = self.prepared.get(test, settings.shape_mode)
        return run_pair(
            prepared,
            load_config(settings.configs[config]),
            reports_dir=settings.reports_dir,
            limits=limits,
            isolate=False,
        )

    def host_for(self, test) -> TestHost:
        """The host of `test`, started on first use (the spare, which may be the previous
        test's host: `end_host`); the previous test's host is closed."""
        if self.host is not None and self.host.test.name != test.name:
            self.close_host()
        if self.host is None:
            settings = self.settings
            join_warming()
            for name in self.host_configs.get(test.name, settings.configs):
                if isinstance(config := load_config(settings.configs[name]), Preloads):
                    preload(config)  # before the first host that runs one of its pairs
            if self.captured and self.tests_ahead.get(test.name, WARM_UP_PAYS_FROM) >= WARM_UP_PAYS_FROM:
                # Once per process, before a fork, never charged to a pair: the first
                # capture's lazy initialization (torch.export's 1.8 s), inherited by every
                # later host. Only once a host had to capture (a run whose captures all
                # come from the frontend cache never pays it), and only while enough hosts
                # are still to start: the warm-up costs about what one host pays for it,
                # so with one test left (the last of `-k TEST`) it would only add its time.
                warm_up_configs(tuple(settings.configs.values()))
            spare, self.spare = self.spare, None
            self.host = TestHost(
                test,
                shape_mode=settings.shape_mode,
                config_loader=functools.partial(_load_named, dict(settings.configs)),
                golden_limits=settings.limits(test),
                # A campaign's blocks (`--reduce-unnamed`) leave the type check to its triage,
                # which checks each bug once (`e2e.fuzz.triage.check_types`).
                reducer=functools.partial(_reduce_on_host, check_types=not settings.reduce_unnamed_only),
                frontend_cache=self.frontend_cache,
                program_cache=self.program_cache,
                spare=spare,
            )
        return self.host

    def plan_hosts(self, items, workers: int = 1) -> None:
        """From the final item order: for each test, how many tests (one host each) this
        process starts from it on (under xdist a worker gets about 1/`workers` of them),
        and which configs its host runs."""
        pairs = [(item.test_name, item.config_name) for item in items if hasattr(item, "config_name")]
        names = list(dict.fromkeys(name for name, _ in pairs))
        self.tests_ahead = {name: (len(names) - index) / max(workers, 1) for index, name in enumerate(names)}
        self.host_configs = {}
        for name, config in pairs:
            self.host_configs.setdefault(name, set()).add(config)

    def keep_spare(self, runs_pairs: bool) -> None:
        """Take the spare host forked at the plugin's registration (`start_spare`) when this
        process runs pairs in hosts and a selected config's frontend will capture; else end it now."""
        spare = _SPARE.pop() if _SPARE else None
        if spare is None:
            return
        captures = bool(capture_warm_ups(tuple(self.settings.configs.values())))
        if runs_pairs and self.settings.isolate and captures:
            self.spare = spare
        else:
            spare.close()

    def close_spare(self) -> None:
        if self.spare is not None:
            self.spare.close()
            self.spare = None

    def end_host(self) -> None:
        """The current test's pairs are over: its host becomes the spare the next test adopts,
        when it ended cleanly (`TestHost.hand_over`), or is closed."""
        if self.host is None:
            return
        handed_over = self.host.hand_over() if self.settings.reuse_hosts else None
        self.close_host()
        if handed_over is not None:
            self.close_spare()
            self.spare = handed_over

    def close_host(self) -> None:
        if self.host is not None:
            self.host.close()
            self.largest_host = max(self.largest_host, (self.host.peak_rss / isolation.MIB, self.host.test.name))
            self.host = None


# The warm-up threads started (`HostPool.start_warming`): every fork of this process waits
# for them (a module-level list, as `os.register_at_fork` takes no state).
_WARMING: list[threading.Thread] = []
# The spare host forked when the plugin was registered, until `HostPool.keep_spare` takes it.
_SPARE: list[SpareHost] = []


def start_spare() -> None:
    """Fork the spare host (`SpareHost`) now, before pytest has parsed its options: the
    frontends' one-time initialization then runs beside pytest's own start and collection.
    A process that runs no pair ends it at configure (`keep_spare`)."""
    if not _SPARE and os.environ.get(SPARE_ENV, "1") != "0":
        _SPARE.append(SpareHost(spare_warm_up(CONFIG_NAMES)))


def spare_warm_up(specs) -> tuple:
    """What a spare host pays before its test is known, in steps: the `spare_warm_up` of the
    frontends of the configs `specs` (the default ones: options are not parsed yet), each once."""
    return tuple(
        step for frontend in _frontends(specs) for step in getattr(load_frontend(frontend), "spare_warm_up", tuple)()
    )


def capture_warm_ups(specs) -> list:
    """The frontends' capture warm-ups (`warm_up_capture`, the FX capture's one-time
    initialization) of the configs `specs`, each once."""
    return [load_frontend(frontend).warm_up_capture for frontend in _frontends(specs)]


def _frontends(specs) -> list[str]:
    names = {getattr(load_config(spec), "frontend", None) for spec in specs}
    return sorted(n for n in names if isinstance(n, str))


def _load_named(configs: dict[str, str], name: str):
    """A host's config loader: picklable (a spare host is handed it), unlike a lambda."""
    return load_config(configs[name])


def join_warming() -> None:
    joined = bool(_WARMING)
    while _WARMING:
        _WARMING.pop().join()
    if joined:
        # What the warm-up imported (torch._dynamo, the export tracer) lives for the whole
        # run: out of the collector's reach, as at configure (`gc.freeze`), or pytest's five
        # collections at its end walk it (a quarter of a second after a `-k` run).
        gc.freeze()


os.register_at_fork(before=join_warming)


def warm_up_configs(specs: tuple[str, ...]) -> None:
    """Each config's own one-time initialization (`warm_up_config`)."""
    for spec in specs:
        warm_up_config(spec)


@functools.cache
def warm_up_config(spec: str) -> None:
    """A config's own one-time initialization (its optional `warm_up()`), paid once per
    process before a fork (the onnx exporter's first call costs seconds; the FX configs'
    first compile on each backend, a quarter second)."""
    config = load_config(spec)
    if isinstance(config, WarmsUp):
        try:
            config.warm_up()
        except Exception:  # noqa: BLE001 - a config that cannot warm up fails in its pairs, with a result
            pass


@functools.cache
def preload(config: Preloads) -> None:
    """A config's imports (`Preloads`), once per process: the hosts forked after inherit them."""
    try:
        config.preload()
    except Exception:  # noqa: BLE001 - a config that cannot preload fails in its pairs, with a result
        pass


def _reduce_on_host(result, prepared, config, reports_dir, time_box, memory_bytes, *, check_types=True):
    """The reducer a test host is handed (imported in the host, when a failure needs it)."""
    from e2e.reducer.strategies import reduce_isolated

    return reduce_isolated(result, prepared, config, reports_dir, time_box, memory_bytes, check_types=check_types)
