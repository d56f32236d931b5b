"""The e2e plugin's state for one pytest process, kept in `config.stash[STATE]`."""

from __future__ import annotations

import functools
import gc
import os
import shlex
import threading
from pathlib import Path

import pytest

from compiler.frontends import load_frontend
from e2e.configs import (
    CONFIG_NAMES,
    OPT_IN_CONFIG_NAMES,
    RUNTIME_CONFIG_NAMES,
    Preloads,
    TakesModels,
    WarmsUp,
    available_configs,
    load_config,
)
from e2e.framework import isolation, registry
from e2e.framework.cache import FrontendCache, ProgramCache, ResultCache
from e2e.framework.dependencies import keep_imports
from e2e.framework.host import SpareHost, TestHost
from e2e.framework.isolation import GIB, Limits
from e2e.framework.prepared import PreparedCache
from e2e.framework.registry import Test
from e2e.framework.result import Result
from e2e.framework.runner import run_pair
from e2e.framework.suite_files import IMPORT_BUDGET, ProbeCache, ProbeHost, SuiteFile, load_suite, suite_files
from e2e.opinfo import SLICES as OPINFO_SLICES

DEFAULT_BUDGET = 300.0  # seconds per pair when --timeout is not given
DEFAULT_MEMORY_CAP_GIB = isolation.DEFAULT_MEMORY_CAP_GIB
# What --no-isolation turns off (the option's help and the e2e summary say it).
NO_ISOLATION_TURNS_OFF = (
    "crash, hang and memory containment (a crash or hang ends the run; --timeout and --memory-cap "
    "do not apply), the import probes, the result, frontend and program caches and the reducer"
)


class E2EState:
    """The run's settings, suite files, caches and test hosts for one pytest process (in
    `config.stash`); the plugin's roles keep their own state (`e2e.hooks`)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.configs = _selected_configs(config)  # name -> spec
        suites = [Path(p) for p in config.getoption("e2e_suite")] or list(config.getini("e2e_suite"))
        self.opinfo_slice = config.getoption("opinfo_slice")
        if self.opinfo_slice:
            if config.getoption("e2e_suite"):
                raise pytest.UsageError("--opinfo-slice chooses the suite itself: give it without --e2e-suite")
            suites = [OPINFO_SLICES[self.opinfo_slice].suite]
        self.reports_dir = Path(config.getoption("reports_dir") or Path(config.rootpath) / "reports").resolve()
        self.generate = _generate_option(config)  # --generate N --generate-seed S: the seeds, or None
        if self.generate is not None:
            if config.getoption("e2e_suite") or self.opinfo_slice:
                raise pytest.UsageError("--generate chooses the suite itself: give it without --e2e-suite")
            from e2e.generate.boundary import SHARE_ENV
            from e2e.generate.register import ENV as GENERATE_ENV
            from e2e.generate.register import PROGRAMS_FILE, save_programs, saved_programs
            from e2e.generate.register import SUITE_FILE as GENERATED_SUITE

            # Before any suite file loads: forked probes and hosts, and the reducer, inherit it.
            os.environ[GENERATE_ENV] = f"{self.generate.start}:{len(self.generate)}"
            if config.getoption("generate_boundary_share") is not None:
                os.environ[SHARE_ENV] = f"{config.getoption('generate_boundary_share'):g}"
            suites = [GENERATED_SUITE]
            saved = saved_programs()  # an xdist worker's: its controller saved them
            if saved is None or saved[0] != list(self.generate):
                save_programs(self.generate, self.reports_dir / PROGRAMS_FILE)
        self.suite_paths = [p.resolve() for p in suites]
        self.suite_files = set(suite_files(self.suite_paths))
        xfail_dir = (
            config.getoption("xfail_dir")
            or (self.opinfo_slice and OPINFO_SLICES[self.opinfo_slice].xfail_dir)
            or self._ini_xfail_dir()
        )
        self.xfail_dir = Path(xfail_dir) if xfail_dir else None  # None: no expected failures
        self.shape_mode = config.getoption("shapes")
        self.budget = _budget(config)
        self.import_budget = config.getoption("import_timeout")
        cap = config.getoption("memory_cap")
        self.memory_cap = int(cap * GIB) if cap and cap > 0 else None
        self.isolate = not config.getoption("no_isolation")
        # A host serves the next test when its own ended cleanly (`TestHost.hand_over`);
        # `E2E_REUSE_HOSTS=0`: a host per test (to measure what reuse saves; docs/running.md).
        self.reuse_hosts = os.environ.get(REUSE_ENV, "1") != "0"
        self.reduce = not config.getoption("no_reduce")
        self.reduce_unnamed_only = config.getoption("reduce_unnamed")
        cache_dir = None
        if not config.getoption("no_result_cache") and self.isolate and getattr(config, "cache", None):
            cache_dir = Path(config.cache.mkdir("e2e-results"))
        self.cache = ResultCache(cache_dir)
        frontend_dir = None
        if not config.getoption("no_frontend_cache") and self.isolate and getattr(config, "cache", None):
            frontend_dir = Path(config.cache.mkdir("e2e-frontend"))
        self.frontend_cache = FrontendCache(frontend_dir)
        program_dir = None
        if not config.getoption("no_program_cache") and self.isolate and getattr(config, "cache", None):
            program_dir = Path(config.cache.mkdir("e2e-programs"))
        self.program_cache = ProgramCache(program_dir)
        self.captured = False  # a host paid a frontend's initialization itself: warm up before the next one
        self.tests_ahead: dict[str, float] = {}  # test -> the tests this process runs from it on (`plan_hosts`)
        self.host_configs: dict[str, set[str]] = {}  # test -> the configs of its items (`plan_hosts`)
        # A worker trusts the probes its controller ran before starting it (`pytest_configure_node`).
        known = getattr(config, "workerinput", {}).get("e2e_probed")
        # A probe is kept whenever a cache is (not only the result cache): its key is the
        # file's text, what it imports and the toolchain, and it decides no result.
        keep_probes = self.isolate and getattr(config, "cache", None) is not None
        self.probes = ProbeCache(config.cache if keep_probes else None, known)
        keep_imports(Path(config.cache.mkdir("e2e-imports")) if keep_probes else None)
        # Collection's probes share one child (what one file imports, the next need not);
        # closed when collection ends (`close_prober`).
        self.prober = ProbeHost()
        self._warming: threading.Thread | None = None  # the warm-up while probing (`_start_warming`)
        self._collected = threading.Event()  # collection is over: the warm-up while probing stops
        self.spare: SpareHost | None = None  # the first host, forked early (`keep_spare`)
        self._suite: dict[Path, SuiteFile] = {}  # the suite files loaded so far, by resolved path
        self.prepared = PreparedCache()  # --no-isolation only
        self.host: TestHost | None = None
        self.largest_host: tuple[float, str] = (0.0, "")  # MiB, test

    def _ini_xfail_dir(self) -> Path | None:
        """The ini's xfail sets are those of the ini's suite: another suite has its own or none."""
        if self.suite_paths != [Path(p).resolve() for p in self.config.getini("e2e_suite")]:
            return None
        return next(iter(self.config.getini("e2e_xfail_dir")), None)

    def rerun_command(self, path: Path, selector: str) -> str:
        """The command that reruns one pair, pasted where this run was started: the file
        relative to that directory (not pytest's rootdir, which moves with how options are
        spelled), and every option that changes the pair's result."""
        here = Path(self.config.invocation_params.dir)
        relative = lambda p: shlex.quote(os.path.relpath(p, here))  # noqa: E731
        words = ["python -m pytest", shlex.quote(f"{os.path.relpath(path, here)}::{selector}")]
        option = self.config.getoption
        words += [f"--e2e-suite {relative(p)}" for p in self.suite_paths if option("e2e_suite")]
        if self.opinfo_slice:
            words.append(f"--opinfo-slice {self.opinfo_slice}")
        if self.generate is not None:  # exactly this test's program: its seed alone
            from e2e.generate.register import seed_of

            seed = seed_of(selector.split("::")[0])
            words.append(
                f"--generate 1 --generate-seed {seed}"
                if seed is not None
                else f"--generate {len(self.generate)} --generate-seed {self.generate.start}"
            )
        config = selector.rpartition("::")[2]
        if self.configs.get(config, config) != config:  # a spec: module:attribute or an entry point
            words.append(f"--config {shlex.quote(self.configs[config])}")
        if self.shape_mode != "annotated":
            words.append(f"--shapes {self.shape_mode}")
        if option("xfail_dir"):
            words.append(f"--xfail-dir {relative(self.xfail_dir)}")
        if has_timeout(self.config) and option("timeout", None):
            words.append(f"--timeout {option('timeout')}")
        if self.import_budget != IMPORT_BUDGET:
            words.append(f"--import-timeout {self.import_budget:g}")
        if option("memory_cap") != DEFAULT_MEMORY_CAP_GIB:
            words.append(f"--memory-cap {option('memory_cap')}")
        if option("no_reduce"):
            words.append("--no-reduce")
        return " ".join(words)

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def limits(self, test) -> Limits:
        return Limits(test.timeout_seconds or self.budget, self.memory_cap)

    @property
    def import_limits(self) -> Limits:
        return Limits(self.import_budget, self.memory_cap)

    @property
    def suite(self) -> dict[Path, SuiteFile]:
        """Every suite file, imported (those collection has not loaded yet, now), with its tests."""
        for path in sorted(self.suite_files - set(self._suite)):
            self.suite_file(path)
        return self._suite

    @property
    def loaded_suite(self) -> dict[Path, SuiteFile]:
        """The suite files collection loaded: those the command line reached, not every file."""
        return self._suite

    def suite_file(self, path: Path) -> SuiteFile:
        """One suite file's tests, for collection: from its import probe (this run's, or one
        kept from an earlier run), without importing the file here; a run of one file
        probes only that file, and `-k` imports only the files whose tests run (`test`)."""
        path = path.resolve()
        if path not in self._suite:
            self._suite.update(
                load_suite(
                    [path],
                    self.import_limits,
                    isolate=self.isolate,
                    register=False,
                    probes=self.probes,
                    prober=self.prober,
                )
            )
        if self.prober.probed >= WARM_WHILE_PROBING_FROM and self.warms_while_probing:
            self._start_warming()
        return self._suite[path]

    @property
    def warms_while_probing(self) -> bool:
        """Whether this process warms up while collection waits for its probes: it runs
        pairs itself (not an xdist controller), in hosts, and has not begun."""
        option = self.config.option
        return (
            self.isolate
            and self._warming is None
            and (self.is_worker or not getattr(option, "numprocesses", None))
            and not option.collectonly
        )

    def _start_warming(self) -> None:
        """The warm-ups every host forked later inherits (`preload`, `warm_up_capture`), in
        a thread, while this process only waits for the probe child: a collection that
        probes many files (`-k` across the suite, no cache) waits for seconds, the warm-up
        then costs no wall time. The thread is joined before any fork (`_join_warming`): a
        child forked while it imports would inherit held locks; and before a suite file is
        imported here (`test`)."""

        def warm() -> None:
            # Only what every host of the run pays (imports, the FX capture's initialization),
            # about as long as probing the suite takes: what it has not finished when the
            # first host forks, that host waits for.
            configs = [load_config(spec) for spec in self.configs.values()]
            for config in configs:
                if isinstance(config, Preloads):
                    preload(config)
            for warm_capture in self._capture_warm_ups():
                try:
                    warm_capture()
                except Exception:  # noqa: BLE001 - a frontend that cannot warm up fails in its pairs
                    pass
            # Then, while the probes still leave this core idle, each config's own warm-up
            # (the backends' first compiles: every host's first pairs paid them again); the
            # first host waits for the one under way, no more.
            for spec in self.configs.values():
                if self._collected.is_set():
                    break
                warm_up_config(spec)

        self._warming = threading.Thread(target=warm, name="e2e-warm-up", daemon=True)
        _WARMING.append(self._warming)
        self._warming.start()
        # This process is now warmed up for every host it forks: a spare's warm-up would be
        # the same work twice, on a core the probes and this thread need.
        self.close_spare()

    def _capture_warm_ups(self) -> list:
        """The selected configs' frontends' capture warm-ups (`warm_up_capture`, the FX
        capture's one-time initialization), each once."""
        names = {getattr(load_config(spec), "frontend", None) for spec in self.configs.values()}
        frontends = [load_frontend(name) for name in sorted(n for n in names if isinstance(n, str))]
        return [f.warm_up_capture for f in frontends]

    def close_prober(self) -> None:
        """Collection is over: the probe child goes (a later load starts its own)."""
        self._collected.set()
        self.prober.close()

    def test(self, path: Path, name: str) -> Test:
        """A collected test, its file imported here on first use (its probe was clean)."""
        if name not in registry.GLOBAL_TEST_REGISTRY:
            # Never beside the warm-up thread: importing a suite file runs its tests' input
            # factories (`torch.manual_seed`, wrapped by torch._dynamo), and torch.fx keeps the
            # node metadata they annotate in a module global the thread's export uses too
            # (a `KeyError: 'custom'` in `fx_traceback.annotate` broke the import).
            _join_warming()
            loaded = load_suite([path], self.import_limits, isolate=self.isolate, probes=self.probes)[path.resolve()]
            if name not in registry.GLOBAL_TEST_REGISTRY:
                why = loaded.broken.error if loaded.broken is not None else loaded.skip_reason or "no such test"
                raise E2EImportError(f"{name}: {path} imported cleanly in its probe, not in this process: {why}")
        return registry.GLOBAL_TEST_REGISTRY[name]

    def run_pair(self, test, config: str, limits: Limits, *, diagnose: bool = True) -> Result:
        """Where a pair runs, decided here alone: on its test's host, where a crash, hang or
        runaway allocation ends only the pair; with --no-isolation, in this process.
        `diagnose`: record what a host that times out was doing (not for an expected hang)."""
        if self.isolate:
            result = self.host_for(test).run(config, self.reports_dir, limits, diagnose=diagnose)
            loaded = load_config(self.configs[config])
            if isinstance(loaded, WarmsUp) and loaded.host_paid_warm_up(result):
                self.captured = True  # later hosts would pay it too
            return result
        prepared = self.prepared.get(test, self.shape_mode)
        return run_pair(
            prepared, load_config(self.configs[config]), reports_dir=self.reports_dir, limits=limits, isolate=False
        )

    def rerun_pair(self, test, config: str, limits: Limits) -> Result:
        """A pair again, on a fresh host of its test (nothing an earlier pair ran is in it):
        for a timeout nothing confirmed (`e2e.pair`). Isolated runs only."""
        host = self.host_for(test)
        host.restart()
        return host.run(config, self.reports_dir, limits)

    def reduce_pair(self, test, result: Result, time_box: float):
        """The reducer's outcome for a failing pair (in its test's host), or a note saying why none."""
        if not self.isolate:
            return "reducer: not run: --no-isolation turns it off (it runs in the test host)"
        return self.host_for(test).reduce(result, self.reports_dir, time_box, self.memory_cap)

    def host_for(self, test) -> TestHost:
        """The host of `test`, started on first use (the spare, which may be the previous
        test's host: `end_host`); the previous test's host is closed."""
        if self.host is not None and self.host.test.name != test.name:
            self.close_host()
        if self.host is None:
            _join_warming()
            for name in self.host_configs.get(test.name, self.configs):
                if isinstance(config := load_config(self.configs[name]), Preloads):
                    preload(config)  # before the first host that runs one of its pairs
            if self.captured and self.tests_ahead.get(test.name, WARM_UP_PAYS_FROM) >= WARM_UP_PAYS_FROM:
                # Once per process, before a fork, never charged to a pair: the first
                # capture's lazy initialization (torch.export's 1.8 s), inherited by every
                # later host. Only once a host had to capture (a run whose captures all
                # come from the frontend cache never pays it), and only while enough hosts
                # are still to start: the warm-up costs about what one host pays for it,
                # so with one test left (the last of `-k TEST`) it would only add its time.
                warm_up_configs(tuple(self.configs.values()))
            spare, self.spare = self.spare, None
            self.host = TestHost(
                test,
                shape_mode=self.shape_mode,
                config_loader=functools.partial(_load_named, dict(self.configs)),
                golden_limits=self.limits(test),
                # A campaign's blocks (`--reduce-unnamed`) leave the type check to its triage,
                # which checks each bug once (`e2e.fuzz.triage.check_types`).
                reducer=functools.partial(_reduce_on_host, check_types=not self.reduce_unnamed_only),
                frontend_cache=self.frontend_cache,
                program_cache=self.program_cache,
                spare=spare,
            )
        return self.host

    @functools.cached_property
    def model_formats(self) -> dict[str, tuple[str, ...]]:
        """The model formats each selected config compiles (`TakesModels`; else torch modules)."""
        formats = {}
        for name, spec in self.configs.items():
            config = load_config(spec)
            formats[name] = tuple(config.model_formats) if isinstance(config, TakesModels) else ("torch",)
        return formats

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
        process runs pairs in hosts and an FX config will capture; else end it now."""
        spare = _SPARE.pop() if _SPARE else None
        if spare is None:
            return
        captures = bool(self._capture_warm_ups())
        if runs_pairs and self.isolate and captures:
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
        handed_over = self.host.hand_over() if self.reuse_hosts else None
        self.close_host()
        if handed_over is not None:
            self.close_spare()
            self.spare = handed_over

    def close_host(self) -> None:
        if self.host is not None:
            self.host.close()
            self.largest_host = max(self.largest_host, (self.host.peak_rss / isolation.MIB, self.host.test.name))
            self.host = None


class E2EImportError(Exception):
    """A suite file whose probe was clean did not import in this process."""


STATE = pytest.StashKey[E2EState]()
WARM_UP_PAYS_FROM = 2  # tests still to start (this one included) for a warm-up to pay off
# Probes of a collection after which it warms up meanwhile: a run of one file probes one.
WARM_WHILE_PROBING_FROM = 2
# The warm-up threads started (`E2EState._start_warming`): every fork of this process waits
# for them (a module-level list, as `os.register_at_fork` takes no state).
_WARMING: list[threading.Thread] = []


# The spare host forked when the plugin was registered, until `E2EState.keep_spare` takes it.
_SPARE: list[SpareHost] = []
# `E2E_SPARE_HOST=0`: no spare host (to measure what it saves on this machine; docs/running.md).
SPARE_ENV = "E2E_SPARE_HOST"
REUSE_ENV = "E2E_REUSE_HOSTS"


def start_spare() -> None:
    """Fork the spare host (`SpareHost`) now, before pytest has parsed its options: the
    frontends' one-time initialization then runs beside pytest's own start and collection.
    A process that runs no pair ends it at configure (`keep_spare`)."""
    if not _SPARE and os.environ.get(SPARE_ENV, "1") != "0":
        _SPARE.append(SpareHost(spare_warm_up(CONFIG_NAMES)))


def spare_warm_up(specs) -> tuple:
    """What a spare host pays before its test is known, in steps: the `spare_warm_up` of the
    frontends of the configs `specs` (the default ones: options are not parsed yet), each once."""
    names = {getattr(load_config(spec), "frontend", None) for spec in specs}
    return tuple(
        step
        for name in sorted(n for n in names if isinstance(n, str))
        for step in getattr(load_frontend(name), "spare_warm_up", tuple)()
    )


def _load_named(configs: dict[str, str], name: str):
    """A host's config loader: picklable (a spare host is handed it), unlike a lambda."""
    return load_config(configs[name])


def _join_warming() -> None:
    joined = bool(_WARMING)
    while _WARMING:
        _WARMING.pop().join()
    if joined:
        # What the warm-up imported (torch._dynamo, the export tracer) lives for the whole
        # run: out of the collector's reach, as at configure (`gc.freeze`), or pytest's five
        # collections at its end walk it (a quarter of a second after a `-k` run).
        gc.freeze()


os.register_at_fork(before=_join_warming)


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


def _selected_configs(config) -> dict[str, str]:
    specs = [n.strip() for opt in config.getoption("config") for n in opt.split(",") if n.strip()]
    if not specs:  # the default ones, and an opt-in or runtime config a node id names (`file::Test::onnx`)
        named = {arg.rsplit("::", 1)[-1] for arg in config.args if "::" in arg}
        chosen = OPT_IN_CONFIG_NAMES + RUNTIME_CONFIG_NAMES
        specs = list(CONFIG_NAMES) + sorted(name for name in named if name in chosen or "@" in name)
    configs = {}
    for spec in specs:
        try:
            configs[load_config(spec).name] = spec
        except ValueError as error:
            raise pytest.UsageError(f"{error} (known: {', '.join(available_configs())})") from None
    return configs


def _generate_option(config: pytest.Config) -> range | None:
    count = config.getoption("generate")
    if count is None:
        return None
    if count < 1:
        raise pytest.UsageError(f"--generate {count}: give the number of programs, 1 or more")
    start = config.getoption("generate_seed")
    return range(start, start + count)


def _budget(config) -> float:
    value = config.getoption("timeout", None) or config.getini("timeout") if has_timeout(config) else None
    return float(value) if value and float(value) > 0 else DEFAULT_BUDGET


def has_timeout(config) -> bool:
    return config.pluginmanager.hasplugin("timeout")


def _reduce_on_host(result, prepared, config, reports_dir, time_box, memory_bytes, *, check_types=True):
    """The reducer a test host is handed (imported in the host, when a failure needs it)."""
    from e2e.reducer.strategies import reduce_isolated

    return reduce_isolated(result, prepared, config, reports_dir, time_box, memory_bytes, check_types=check_types)
