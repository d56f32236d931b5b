"""The e2e plugin's state for one pytest process, kept in `config.stash[STATE]`: the run's
parts, each its own object (`E2EState`): its frozen settings (`e2e.settings.Settings`), its
caches, the suite's loading (`SuiteLoader`) and its test hosts (`e2e.host_pool.HostPool`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.framework import registry
from e2e.framework.cache import FrontendCache, ProgramCache, ResultCache
from e2e.framework.dependencies import keep_imports
from e2e.framework.registry import Test
from e2e.framework.suite_files import ProbeCache, ProbeHost, SuiteFile, load_suite
from e2e.host_pool import HostPool, join_warming
from e2e.settings import Settings


@dataclass(frozen=True)
class Caches:
    """The run's caches across runs (in pytest's cache directory; none with --no-isolation):
    results, frontend captures and imports, lowered programs, and the suite files' import probes."""

    results: ResultCache
    frontend: FrontendCache
    programs: ProgramCache
    probes: ProbeCache

    @classmethod
    def of(cls, config: pytest.Config, settings: Settings) -> Caches:
        kept = settings.isolate and getattr(config, "cache", None) is not None

        def directory(option: str, name: str) -> Path | None:
            return Path(config.cache.mkdir(name)) if kept and not config.getoption(option) else None

        # A worker trusts the probes its controller ran before starting it (`pytest_configure_node`).
        known = getattr(config, "workerinput", {}).get("e2e_probed")
        # A probe is kept whenever a cache is (not only the result cache): its key is the
        # file's text, what it imports and the toolchain, and it decides no result.
        keep_imports(Path(config.cache.mkdir("e2e-imports")) if kept else None)
        return cls(
            ResultCache(directory("no_result_cache", "e2e-results")),
            FrontendCache(directory("no_frontend_cache", "e2e-frontend")),
            ProgramCache(directory("no_program_cache", "e2e-programs")),
            ProbeCache(config.cache if kept else None, known),
        )


class SuiteLoader:
    """The suite's files and tests as this process loads them: each file's tests from its
    import probe (collection's probes share one child, closed when collection ends), a test's
    file imported here on its first pair. Probing a second file starts the hosts' warm-up."""

    def __init__(self, settings: Settings, probes: ProbeCache, hosts: HostPool):
        self.settings = settings
        self.probes = probes
        self.hosts = hosts
        self.prober = ProbeHost()  # closed when collection ends (`close_prober`)
        self._loaded: dict[Path, SuiteFile] = {}  # the suite files loaded so far, by resolved path

    @property
    def loaded(self) -> dict[Path, SuiteFile]:
        """The suite files collection loaded: those the command line reached, not every file."""
        return self._loaded

    def suite_file(self, path: Path) -> SuiteFile:
        """One suite file's tests, for collection: from its import probe (this run's, or one
        kept from an earlier run), without importing the file here; a run of one file
        probes only that file, and `-k` imports only the files whose tests run (`test`)."""
        path = path.resolve()
        if path not in self._loaded:
            self._loaded.update(
                load_suite(
                    [path],
                    self.settings.import_limits,
                    isolate=self.settings.isolate,
                    register=False,
                    probes=self.probes,
                    prober=self.prober,
                )
            )
        if self.hosts.warms_while_probing(self.prober.probed):
            self.hosts.start_warming()
        return self._loaded[path]

    def close_prober(self) -> None:
        """Collection is over: the probe child goes (a later load starts its own), and the
        warm-up while probing stops."""
        self.hosts.collection_ended()
        self.prober.close()

    def test(self, path: Path, name: str) -> Test:
        """A collected test, its file imported here on first use (its probe was clean)."""
        if name not in registry.GLOBAL_TEST_REGISTRY:
            # Never beside the warm-up thread: importing a suite file runs its tests' input
            # factories (`torch.manual_seed`, wrapped by torch._dynamo), and torch.fx keeps the
            # node metadata they annotate in a module global the thread's export uses too
            # (a `KeyError: 'custom'` in `fx_traceback.annotate` broke the import).
            join_warming()
            settings = self.settings
            loaded = load_suite([path], settings.import_limits, isolate=settings.isolate, probes=self.probes)
            loaded = loaded[path.resolve()]
            if name not in registry.GLOBAL_TEST_REGISTRY:
                why = loaded.broken.error if loaded.broken is not None else loaded.skip_reason or "no such test"
                raise E2EImportError(f"{name}: {path} imported cleanly in its probe, not in this process: {why}")
        return registry.GLOBAL_TEST_REGISTRY[name]


class E2EState:
    """The run's parts for one pytest process (in `config.stash`), each its own object: the
    plugin's roles keep their own state (`e2e.hooks`) and read these."""

    def __init__(self, config: pytest.Config):
        self.settings = Settings.of(config)
        self.caches = Caches.of(config, self.settings)
        self.hosts = HostPool(self.settings, self.caches.frontend, self.caches.programs)
        self.suite = SuiteLoader(self.settings, self.caches.probes, self.hosts)


class E2EImportError(Exception):
    """A suite file whose probe was clean did not import in this process."""


STATE = pytest.StashKey[E2EState]()
