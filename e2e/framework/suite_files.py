"""The suite loader: suite files imported without letting a broken one end the run, and
the tests each registered.

`load_suite(paths)` is the one way suites are loaded (the pytest plugin, the reducer's
command line, mutation testing, the benchmarks). A file's tests are the tests whose
module-level code it ran (`Test.origin`, recorded at registration), so a suite file that
imports another one does not take that one's tests.

A suite file is user code that runs at import. Each file is first imported in a forked
child (the *import probe*) under its own budget (`IMPORT_BUDGET`, `--import-timeout`: a
file such as the OpInfo sweep computes its tests at import, which takes minutes, not a
pair's seconds): a segfault, an abort, `sys.exit()`, a hang or an exception there becomes
that file's result (stage `import`), and only a file that imported cleanly in the child is
imported in the loading process to register its tests. The files of one load are probed
one after another in one child (`ProbeHost`), each under its own budget, so what they
import is imported once (the model zoo's transformers, the property files' hypothesis):
a file's probe sees the files probed before it imported, as the loading process does; a
probe that crashes, hangs or outgrows its cap ends the child, and the next file gets a
new one. A clean probe is remembered by the
text of the file and of the project modules it imports, and the toolchain (`ProbeCache`).
A file whose import needs an optional package that is not installed (or calls
`pytest.skip`) is skipped with the reason.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from e2e.framework import isolation
from e2e.framework.isolation import Limits
from e2e.framework.registry import Test, registered_from
from e2e.framework.result import ERROR, Result
from e2e.framework.runner import abnormal_result
from e2e.framework.signature import Signature

# Seconds an import probe may take (a pair's budget is for one test on one config): the
# full OpInfo sweep's file classifies ~5,000 samples by running each natively, ~4 min on
# a loaded 2-core machine.
IMPORT_BUDGET = 1800.0

_OWN_SUITE = Path(__file__).resolve().parents[1] / "test_suite"


class TestInfo(NamedTuple):
    """What collection needs of a registered test (its items, their marks), known from the
    file's probe without importing the file here: a run of a few tests (`-k`) imports only
    the files whose tests run."""

    __test__ = False  # not a pytest class

    name: str
    model_format: str = "torch"
    skip_reason: str | None = None
    marks: tuple[str, ...] = ()


def infos_of(path: Path) -> list[TestInfo]:
    from e2e.framework.registry import GLOBAL_TEST_REGISTRY

    tests = (GLOBAL_TEST_REGISTRY[name] for name in registered_from(path))
    return [TestInfo(t.name, t.model_format, t.skip_reason, tuple(t.marks)) for t in tests]


@dataclass
class SuiteFile:
    path: Path
    tests: list[str] = field(default_factory=list)
    broken: Result | None = None  # the file's import failed (stage `import`)
    skip_reason: str | None = None
    infos: dict[str, TestInfo] = field(default_factory=dict)  # by name, for every test in `tests`

    def know(self, infos: Iterable[TestInfo]) -> SuiteFile:
        self.infos = {info.name: info for info in infos}
        self.tests = list(self.infos)
        return self


def module_name(path: Path) -> str:
    """The project's own suite imports as `e2e.test_suite.<stem>`; any other file under a
    name unique to its directory (two suites may both have `basic.py`)."""
    path = path.resolve()
    if path.parent == _OWN_SUITE:
        return f"e2e.test_suite.{path.stem}"
    digest = hashlib.sha1(str(path.parent).encode()).hexdigest()[:8]
    return f"e2e_suite_{digest}.{path.stem}"


def _import(path: Path) -> None:
    name = module_name(path)
    if name in sys.modules:
        return
    if name.startswith("e2e.test_suite."):
        importlib.import_module(name)
        return
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _classify(error: BaseException) -> str | None:
    """A skip reason when the import failed for want of an optional package, else None."""
    if type(error).__name__ == "Skipped":  # pytest.skip / importorskip at module level
        return str(getattr(error, "msg", error))
    if isinstance(error, ModuleNotFoundError) and error.name:
        try:
            missing = importlib.util.find_spec(error.name) is None
        except (ImportError, ValueError):
            missing = True
        if missing:
            top = error.name.split(".")[0]
            what = f"the package {top!r}" if error.name == top else f"the module {error.name!r}"
            return f"needs {what}, which is not installed"
    return None


def _probe(path: Path) -> tuple[str, Any]:
    """In the child: import the file (unless an earlier file of the probe imported it, as the
    loading process would); ("ok", its tests' `TestInfo`s as lists) or (skip | error, text)."""
    try:
        if not _loaded(path):
            _import(path)
    except BaseException as error:  # noqa: BLE001 - SystemExit included
        import traceback

        skip = _classify(error)
        return ("skip", skip) if skip else ("error", traceback.format_exc(limit=-6))
    return ("ok", [list(info) for info in infos_of(path)])  # plain lists: a JSON cache, execnet


class ProbeCache:
    """Files that imported cleanly in a probe, by their text, the text of the project modules
    they import, and the toolchain but torch-mlir's build (`probe_fingerprint`; None: no
    memory), and by path, what this run's xdist
    controller probed (`known`: its workers need not probe again)."""

    def __init__(self, cache, known: dict[str, list] | None = None):  # a pytest Cache, or None
        self.cache = cache
        self.known = known or {}

    def _key(self, path: Path) -> str:
        from e2e.framework.dependencies import files_digest, module_dependencies
        from e2e.framework.fingerprints import IDENTITY_SALT_ENV, probe_fingerprint

        # A suite file may read the project's E2E_ variables at import (the generated suite
        # registers the seeds $E2E_GENERATE names): they are part of what it registers. Not
        # the salt that stands for a torch-mlir rebuild: a rebuild registers the same tests.
        environment = sorted((k, v) for k, v in os.environ.items() if k.startswith("E2E_") and k != IDENTITY_SALT_ENV)
        text = f"{probe_fingerprint()}\0{files_digest(module_dependencies(path))}\0{environment}"
        return f"e2e/probes/{hashlib.sha256(text.encode()).hexdigest()[:32]}"

    def get(self, path: Path) -> list[TestInfo] | None:
        known = self.known.get(str(path))
        if known is None and self.cache is not None:
            known = self.cache.get(self._key(path), None)
        if known is None or not all(_is_info(info) for info in known):
            return None  # never probed, or written by another version of this loader: probe again
        return [
            TestInfo(name, model_format, skip_reason, tuple(marks)) for name, model_format, skip_reason, marks in known
        ]

    def put(self, path: Path, infos: list) -> None:
        self.known[str(path)] = infos  # this process loads it again without a second probe
        if self.cache is not None:
            self.cache.set(self._key(path), infos)


def _is_info(info: Any) -> bool:
    """A probe's record of one test, as `_probe` writes it: [name, model_format, skip_reason, marks]."""
    return (
        isinstance(info, list)
        and len(info) == 4
        and isinstance(info[0], str)
        and isinstance(info[1], str)
        and (info[2] is None or isinstance(info[2], str))
        and isinstance(info[3], list | tuple)
    )


class ProbeHost:
    """The child that probes suite files, one request a file under that file's limits,
    started on the first probe and again after a probe that ended it."""

    def __init__(self) -> None:
        self._child: isolation.Child | None = None
        self.probed = 0  # files probed so far

    def probe(self, path: Path, limits: Limits) -> Any:
        """`_probe(path)`'s reply, or how the child ended (`isolation.Crashed`, `TimedOut`, `OverMemory`)."""
        if self._child is None:
            self._child = isolation.Child(_serve_probes, name="probe")
        self.probed += 1
        reply = self._child.request(path, limits)
        if not isinstance(reply, tuple):  # the probe took the child down: the next file gets a new one
            self._child.kill()
            self._child = None
        return reply

    def close(self) -> None:
        if self._child is not None:
            self._child.close()
            self._child = None


def _serve_probes(channel: isolation.Channel) -> None:
    while True:
        try:
            path = channel.receive()
        except EOFError:
            return
        channel.send(_probe(path))


def clean_probes(files: dict[Path, SuiteFile]) -> dict[str, list]:
    """The files that imported cleanly, with their tests: a `ProbeCache`'s `known`."""
    return {
        str(path): [list(info) for info in f.infos.values()]
        for path, f in files.items()
        if f.broken is None and f.skip_reason is None
    }


def suite_files(paths: Iterable[str | Path]) -> list[Path]:
    """The suite files under `paths`: a directory's `*.py` but `__init__.py`, a file itself."""
    files: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            files.update((p.resolve(), None) for p in sorted(path.glob("*.py")) if p.name != "__init__.py")
        elif path.is_file():
            files[path.resolve()] = None
    return list(files)


def load_suite(
    paths: Iterable[str | Path],
    limits: Limits | None = None,
    *,
    isolate: bool = True,
    register: bool = True,
    probes: ProbeCache | None = None,
    prober: ProbeHost | None = None,
) -> dict[Path, SuiteFile]:
    """Every suite file under `paths` (directories or files), by resolved path, with the
    names of the tests it registers, or why it has none (broken, skipped).

    isolate: probe each file in a child under `limits` (default: `IMPORT_BUDGET`, no memory
    cap) first (False: import it here, where
    an exception is still its result but a crash is the caller's). register: import the
    clean files here, so their tests are in the registry (False: only learn their names).
    prober: the probe child, kept by the caller across loads (default: one for this load,
    closed after it).
    """
    limits = limits or Limits(IMPORT_BUDGET)
    own = prober is None
    prober = prober or ProbeHost()
    try:
        return {
            path: _load_file(
                path, limits, isolate=isolate, register=register, probes=probes or ProbeCache(None), prober=prober
            )
            for path in suite_files(paths)
        }
    finally:
        if own:
            prober.close()


def _loaded(path: Path) -> bool:
    """Imported already: by the loader, or as a module of another suite file."""
    return module_name(path) in sys.modules or bool(registered_from(path))


def _load_file(
    path: Path, limits: Limits, *, isolate: bool, register: bool, probes: ProbeCache, prober: ProbeHost
) -> SuiteFile:
    """One suite file (probed in a child first, unless this very file on this very toolchain
    imported cleanly before): what it registered or why not."""
    suite_file = SuiteFile(path)
    name = f"{path.name}::import"
    if isolate and not _loaded(path) and (infos := probes.get(path)) is not None:
        if not register:
            return suite_file.know(infos)
    elif isolate and not _loaded(path):
        probe = prober.probe(path, limits)
        if not isinstance(probe, tuple):  # crashed, hung, outgrew the cap
            suite_file.broken = abnormal_result(Test(name, lambda: None, lambda m, tu: None), "-", probe, "import")
            suite_file.broken.error = f"importing {path}: {suite_file.broken.error}"
            if isinstance(probe, isolation.TimedOut):
                suite_file.broken.error += f" (the import probe's budget, --import-timeout {limits.seconds:g} s)"
            return suite_file
        kind, value = probe
        if kind == "skip":
            suite_file.skip_reason = value
            return suite_file
        if kind == "error":
            suite_file.broken = _import_error(name, path, value)
            return suite_file
        probes.put(path, value)
        if not register:
            return suite_file.know(probes.get(path))
    try:
        if not _loaded(path):
            _import(path)
    except BaseException as error:  # noqa: BLE001
        import traceback

        skip = _classify(error)
        if skip:
            suite_file.skip_reason = skip
        else:
            suite_file.broken = _import_error(name, path, traceback.format_exc(limit=-6))
        return suite_file
    return suite_file.know(infos_of(path))


def _import_error(name: str, path: Path, text: str) -> Result:
    first = text.strip().splitlines()[-1] if text.strip() else "error"
    return Result(
        name,
        "-",
        ERROR,
        stage="import",
        signature=Signature("import", "broken test file", first[:200]),
        error=f"{path} could not be imported; its tests did not run:\n{text}",
    )
