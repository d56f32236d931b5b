"""Importing test-suite files without letting a broken one end the run.

A suite file is user code that runs at import. Each file is first imported in a forked
child under a deadline: a segfault, an abort, `sys.exit()`, a hang or an exception there
becomes that file's result (stage `import`), and only a file that imported cleanly in
the child is imported in the pytest process to register its tests. A file whose import
needs an optional package that is not installed (or calls `pytest.skip`) is skipped
with the reason.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.framework import isolation
from e2e.framework.isolation import Limits
from e2e.framework.registry import GLOBAL_TEST_REGISTRY, Test
from e2e.framework.result import ERROR, Result
from e2e.framework.runner import abnormal_result
from e2e.framework.signature import Signature

_OWN_SUITE = Path(__file__).resolve().parents[1] / "test_suite"


@dataclass
class SuiteFile:
    path: Path
    tests: list[str] = field(default_factory=list)
    broken: Result | None = None  # the file's import failed (stage `import`)
    skip_reason: str | None = None


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
    """In the child: import the file; ("ok", registered names) or (skip | error, text)."""
    before = set(GLOBAL_TEST_REGISTRY)
    try:
        _import(path)
    except BaseException as error:  # noqa: BLE001 - SystemExit included
        import traceback

        skip = _classify(error)
        return ("skip", skip) if skip else ("error", traceback.format_exc(limit=-6))
    return ("ok", [n for n in GLOBAL_TEST_REGISTRY if n not in before])


def probe_suite_file(path: Path, limits: Limits, known_good: ProbeCache | None = None) -> SuiteFile:
    """What importing the file would register, learnt in a child (nothing is registered here)."""
    return import_suite_file(path, limits, register=False, known_good=known_good)


class ProbeCache:
    """Files that imported cleanly in a probe, by content and toolchain (None: no memory)."""

    def __init__(self, cache):  # a pytest Cache, or None
        self.cache = cache

    def _key(self, path: Path) -> str:
        from e2e.framework.cache import toolchain_fingerprint

        digest = hashlib.sha256(path.read_bytes() + toolchain_fingerprint().encode()).hexdigest()
        return f"e2e/probes/{digest[:32]}"

    def get(self, path: Path) -> list[str] | None:
        return self.cache.get(self._key(path), None) if self.cache is not None else None

    def put(self, path: Path, names: list[str]) -> None:
        if self.cache is not None:
            self.cache.set(self._key(path), names)


def import_suite_file(
    path: Path, limits: Limits, *, isolate: bool = True, register: bool = True, known_good: ProbeCache | None = None
) -> SuiteFile:
    """Import one suite file (probed in a child first, unless this very file on this very
    toolchain imported cleanly before); what it registered or why not."""
    suite_file = SuiteFile(path)
    name = f"{path.name}::import"
    known_good = known_good or ProbeCache(None)
    if isolate and module_name(path) not in sys.modules and (names := known_good.get(path)) is not None:
        if not register:
            suite_file.tests = names
            return suite_file
    elif isolate and module_name(path) not in sys.modules:
        probe = isolation.run_forked(lambda: _probe(path), limits.seconds, limits.memory_bytes)
        if not isinstance(probe, tuple):  # crashed, hung, outgrew the cap
            suite_file.broken = abnormal_result(Test(name, lambda: None, lambda m, tu: None), "-", probe, "import")
            suite_file.broken.error = f"importing {path}: {suite_file.broken.error}"
            return suite_file
        kind, value = probe
        if kind == "skip":
            suite_file.skip_reason = value
            return suite_file
        if kind == "error":
            suite_file.broken = _import_error(name, path, value)
            return suite_file
        known_good.put(path, value)
        if not register:
            suite_file.tests = value
            return suite_file
    before = set(GLOBAL_TEST_REGISTRY)
    try:
        _import(path)
    except BaseException as error:  # noqa: BLE001
        import traceback

        skip = _classify(error)
        if skip:
            suite_file.skip_reason = skip
        else:
            suite_file.broken = _import_error(name, path, traceback.format_exc(limit=-6))
        return suite_file
    suite_file.tests = [n for n in GLOBAL_TEST_REGISTRY if n not in before]
    return suite_file


def _import_error(name: str, path: Path, text: str) -> Result:
    first = text.strip().splitlines()[-1] if text.strip() else "error"
    return Result(
        name,
        "-",
        ERROR,
        stage="import",
        signature=Signature("import", "broken test file", first[:200]).format(),
        error=f"{path} could not be imported; its tests did not run:\n{text}",
    )
