"""The run's settings for one pytest process, frozen once its options are read (`Settings`):
what it runs (configs, suite, shapes), where it writes, and the limits of its pairs."""

from __future__ import annotations

import functools
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from e2e.configs import (
    CONFIG_NAMES,
    OPT_IN_CONFIG_NAMES,
    RUNTIME_CONFIG_NAMES,
    TakesModels,
    available_configs,
    load_config,
)
from e2e.framework import isolation
from e2e.framework.isolation import GIB, Limits
from e2e.framework.suite_files import IMPORT_BUDGET, suite_files
from e2e.opinfo import SLICES as OPINFO_SLICES

DEFAULT_BUDGET = 300.0  # seconds per pair when --timeout is not given
DEFAULT_MEMORY_CAP_GIB = isolation.DEFAULT_MEMORY_CAP_GIB
# What --no-isolation turns off (the option's help and the e2e summary say it).
NO_ISOLATION_TURNS_OFF = (
    "crash, hang and memory containment (a crash or hang ends the run; --timeout and --memory-cap "
    "do not apply), the import probes, the result, frontend and program caches and the reducer"
)
# `E2E_REUSE_HOSTS=0`: a host per test (to measure what reuse saves; docs/running.md).
REUSE_ENV = "E2E_REUSE_HOSTS"


@dataclass(frozen=True)
class Settings:
    """What the command line and the ini decided, read once (`Settings.of`)."""

    config: pytest.Config = field(repr=False, compare=False)
    configs: dict[str, str]  # name -> spec
    suite_paths: list[Path]
    suite_files: frozenset[Path]
    opinfo_slice: str | None
    generate: range | None  # --generate N --generate-seed S: the seeds, or None
    reports_dir: Path
    xfail_dir: Path | None  # None: no expected failures
    shape_mode: str
    budget: float
    import_budget: float
    memory_cap: int | None
    isolate: bool
    # A host serves the next test when its own ended cleanly (`TestHost.hand_over`).
    reuse_hosts: bool
    reduce: bool
    reduce_unnamed_only: bool

    @classmethod
    def of(cls, config: pytest.Config) -> Settings:
        configs = _selected_configs(config)
        suites = [Path(p) for p in config.getoption("e2e_suite")] or list(config.getini("e2e_suite"))
        opinfo_slice = config.getoption("opinfo_slice")
        if opinfo_slice:
            if config.getoption("e2e_suite"):
                raise pytest.UsageError("--opinfo-slice chooses the suite itself: give it without --e2e-suite")
            suites = [OPINFO_SLICES[opinfo_slice].suite]
        reports_dir = Path(config.getoption("reports_dir") or Path(config.rootpath) / "reports").resolve()
        generate = _generate_option(config)
        if generate is not None:
            if config.getoption("e2e_suite") or opinfo_slice:
                raise pytest.UsageError("--generate chooses the suite itself: give it without --e2e-suite")
            suites = [_generated_suite(config, generate, reports_dir)]
        suite_paths = [p.resolve() for p in suites]
        xfail_dir = (
            config.getoption("xfail_dir")
            or (opinfo_slice and OPINFO_SLICES[opinfo_slice].xfail_dir)
            or _ini_xfail_dir(config, suite_paths)
        )
        cap = config.getoption("memory_cap")
        return cls(
            config=config,
            configs=configs,
            suite_paths=suite_paths,
            suite_files=frozenset(suite_files(suite_paths)),
            opinfo_slice=opinfo_slice,
            generate=generate,
            reports_dir=reports_dir,
            xfail_dir=Path(xfail_dir) if xfail_dir else None,
            shape_mode=config.getoption("shapes"),
            budget=_budget(config),
            import_budget=config.getoption("import_timeout"),
            memory_cap=int(cap * GIB) if cap and cap > 0 else None,
            isolate=not config.getoption("no_isolation"),
            reuse_hosts=os.environ.get(REUSE_ENV, "1") != "0",
            reduce=not config.getoption("no_reduce"),
            reduce_unnamed_only=config.getoption("reduce_unnamed"),
        )

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def limits(self, test) -> Limits:
        return Limits(test.timeout_seconds or self.budget, self.memory_cap)

    @property
    def import_limits(self) -> Limits:
        return Limits(self.import_budget, self.memory_cap)

    @functools.cached_property
    def model_formats(self) -> dict[str, tuple[str, ...]]:
        """The model formats each selected config compiles (`TakesModels`; else torch modules)."""
        formats = {}
        for name, spec in self.configs.items():
            config = load_config(spec)
            formats[name] = tuple(config.model_formats) if isinstance(config, TakesModels) else ("torch",)
        return formats

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


def _generated_suite(config: pytest.Config, generate: range, reports_dir: Path) -> Path:
    """The generated programs' suite file, set up before any suite file loads (forked probes
    and hosts, and the reducer, inherit the environment it sets)."""
    from e2e.generate.boundary import SHARE_ENV
    from e2e.generate.register import ENV as GENERATE_ENV
    from e2e.generate.register import PROGRAMS_FILE, save_programs, saved_programs
    from e2e.generate.register import SUITE_FILE as GENERATED_SUITE

    os.environ[GENERATE_ENV] = f"{generate.start}:{len(generate)}"
    if config.getoption("generate_boundary_share") is not None:
        os.environ[SHARE_ENV] = f"{config.getoption('generate_boundary_share'):g}"
    saved = saved_programs()  # an xdist worker's: its controller saved them
    if saved is None or saved[0] != list(generate):
        save_programs(generate, reports_dir / PROGRAMS_FILE)
    return GENERATED_SUITE


def _ini_xfail_dir(config: pytest.Config, suite_paths: list[Path]) -> Path | None:
    """The ini's xfail sets are those of the ini's suite: another suite has its own or none."""
    if suite_paths != [Path(p).resolve() for p in config.getini("e2e_suite")]:
        return None
    return next(iter(config.getini("e2e_xfail_dir")), None)


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
