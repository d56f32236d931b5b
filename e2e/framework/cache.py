"""A result cache across runs: an unchanged test on an unchanged compiler is not rerun;
the frontend cache (a test's capture or import across runs) and the program cache (lowered
programs and pipeline stage outputs across test hosts and runs) are below.

A pair's key (`pair_key`) hashes:

- the test: its name, and the text (with the project-relative path) of every file it
  depends on (`test_dependencies`): the suite file that registered it (`Test.origin`),
  the file that defines what it runs (`Test.defined_in`: where its invoker was defined,
  e.g. a helper such as `zoo_common.py`), and every project or suite module those import, transitively (import
  statements read with `ast`; a module is looked for under the project root and beside
  the importing file, never in site-packages; never into the compiler, which the
  toolchain part covers);
- the pair: the config's name, the shape mode and the budget;
- the toolchain (`versions_fingerprint`): the versions of torch and torch-mlir, torch's
  kernel ISA and the JIT target, the identity of torch-mlir's native libraries (a user's
  own build at the same version still changes the key), the versions of the optional
  packages a result depends on (`_PACKAGES`: the onnx exporter, its backend cases and
  oracle, hypothesis, which draws the property families, transformers, which builds the
  zoo, and the runtimes), the OpInfo database in torch's installed testing sources
  (`torch/testing/_internal/common_methods_invocations.py` and `opinfo/`), and every
  source of this project's `_SOURCE_DIRS`: the compiler, the framework, the configs, the
  reducer, the generated suites' sources (`e2e/onnx_backend`, `e2e/opinfo`,
  `e2e/stablehlo_testdata`, `e2e/properties`) and the upstream compat layer
  (`torch_mlir_e2e_test`). A StableHLO testdata program's `.mlir` file is its test's
  `defined_in`, so its text is in its key.

Not in the key: xfail sets (they change how a result is judged, not the result), the
source of a config given as `--config module:attribute` from outside the project, and
modules imported dynamically (`importlib`) rather than by an import statement.

Timeouts and memory-cap kills depend on the machine's load and are never cached. Entries
are small JSON files under pytest's cache directory (`JsonStore`), which mutation testing's
record cache shares, with keys from the same `cache_key`.

The fingerprints are in `e2e.framework.fingerprints`, what a test depends on in
`e2e.framework.dependencies`, the stores in `e2e.framework.stores`; this module holds the
three caches and their keys.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from e2e.framework import dependencies, fingerprints
from e2e.framework.dependencies import files_digest, test_dependencies
from e2e.framework.fingerprints import IMPORT, frontend_fingerprint, program_fingerprint, versions_fingerprint
from e2e.framework.result import MEMORY, TIMEOUT, Result
from e2e.framework.stores import JsonStore, PickleStore

if TYPE_CHECKING:
    from e2e.framework.registry import Test

_UNCACHED = (TIMEOUT, MEMORY)


def forget_files() -> None:
    """Forget what was read from files (each is read once per process): digests, imports,
    the toolchain's fingerprints. For a process that outlives an edit (a test of the cache)."""
    for cached in (
        fingerprints.versions_fingerprint,
        fingerprints.probe_fingerprint,
        fingerprints.frontend_fingerprint,
        fingerprints.program_fingerprint,
        fingerprints.tree_digest,
        fingerprints.file_digest,
        dependencies._imports,
        dependencies._closure,
        dependencies._files_digest,
    ):
        cached.cache_clear()


# --- the result cache ------------------------------------------------------------------


def test_part(test: Test) -> str:
    """What every key of `test` holds: its name and the digest of every file it depends on."""
    return f"{test.name}\0{files_digest(test_dependencies(test))}"


def cache_key(test: Test, *parts: str) -> str:
    """The key of a result of `test` that also depends on `parts` (a config, a shape mode,
    ...): the toolchain, the test's name and every file it depends on, the parts."""
    return hashlib.sha256("\0".join([versions_fingerprint(), test_part(test), *parts]).encode()).hexdigest()


def pair_key(test: Test, config: str, shape_mode: str, budget: float) -> str:
    return cache_key(test, config, shape_mode, str(budget))


class ResultCache:
    """Results by pair key, in `directory` (None: disabled)."""

    def __init__(self, directory: Path | None):
        self.store = JsonStore(directory)

    def get(self, key: str) -> Result | None:
        data = self.store.get(key)
        if data is None:
            return None
        try:
            result = Result.from_json(data)
        except TypeError:
            return None
        if result.repro_path and not Path(result.repro_path).exists():
            result.notes.append(f"the reproducer of an earlier run is gone ({result.repro_path})")
            result.repro_path = None
        result.cached = True
        return result

    def put(self, key: str, result: Result) -> None:
        if result.outcome in _UNCACHED or result.cached:
            return
        self.store.put(key, result.to_json())


# --- the frontend cache ----------------------------------------------------------------

FRONTEND_ENTRY_BYTES = 64 << 20  # a larger capture (a big model's weights) is not kept
FRONTEND_CACHE_BYTES = 2 << 30  # the least recently used entries go past this


class FrontendCache:
    """A test's frontend results across runs, in `directory` (None: disabled): a rerun after
    a change to the compiler's lowerings, passes or executors compiles the import of the run
    before; one after a rebuild of torch-mlir or a change to its importer imports the capture
    of the run before. Each is what the run would compute again. Keyed by the test
    (`cache_key`'s test part: every file it depends on), the shape mode, what was captured
    (method, call shapes, dynamic dims) and `frontend_fingerprint(stage)`, `stage` being
    CAPTURE (with the frontend's `capture_sources`) or IMPORT."""

    def __init__(self, directory: Path | None):
        self.store = PickleStore(directory, FRONTEND_ENTRY_BYTES)

    def for_test(self, test: Test, shape_mode: str) -> FrontendEntries | None:
        """What this cache keeps of `test` in `shape_mode`; None when disabled."""
        return FrontendEntries(self.store, test, shape_mode) if self.store.directory is not None else None

    def trim(self, limit: int = FRONTEND_CACHE_BYTES) -> int:
        """Remove the least recently used entries past `limit` bytes; returns how many."""
        return self.store.trim(limit)


class FrontendEntries:
    """One test's entries of the frontend cache, in one shape mode, by what was captured
    (method, call shapes, dynamic dims) and stage (CAPTURE, with the frontend's
    `capture_sources`, or IMPORT)."""

    def __init__(self, store: PickleStore, test: Test, shape_mode: str):
        self.store = store
        self.test = test
        self.shape_mode = shape_mode

    @functools.cached_property
    def _test_part(self) -> str:
        return f"{test_part(self.test)}\0{self.shape_mode}"

    def _name(self, key: object, stage: str, capture_sources: tuple[str, ...] = ()) -> str:
        fingerprint = frontend_fingerprint(stage, capture_sources)
        return hashlib.sha256("\0".join([fingerprint, self._test_part, repr(key)]).encode()).hexdigest()

    def get(self, key: object, stage: str = IMPORT, capture_sources: tuple[str, ...] = ()) -> object | None:
        return self.store.get(self._name(key, stage, capture_sources))

    def put(self, key: object, value: object, stage: str = IMPORT, capture_sources: tuple[str, ...] = ()) -> None:
        self.store.put(self._name(key, stage, capture_sources), value)


# --- the program cache -------------------------------------------------------------------

PROGRAM_ENTRY_BYTES = 16 << 20  # a larger lowered program is compiled again when needed
PROGRAM_CACHE_BYTES = 1 << 30  # the least recently used entries go past this


class ProgramCache:
    """Programs the compiler lowered (text the JIT loads; the eager config's single ops,
    `compiler.frontends.eager_mode.LoweredOpStore`) and every config's pipeline stage outputs
    (`compiler.stages.Snapshots.memo`), shared by the test hosts of a run and by later
    runs, in `directory` (None: disabled). Keyed by the compiler's key (an op, its
    argument signature, backend and opt level; a stage, its passes and input IR) and
    `program_fingerprint()`: an edit to the compiler, torch or torch-mlir compiles every
    program and runs every stage again."""

    def __init__(self, directory: Path | None):
        self.store = PickleStore(directory, PROGRAM_ENTRY_BYTES)
        # Here, in the pytest process: a test host forked from it does not hash the sources again.
        self.fingerprint = program_fingerprint() if directory is not None else ""

    def _name(self, key: str) -> str:
        return hashlib.sha256(f"{self.fingerprint}\0{key}".encode()).hexdigest()

    def get(self, key: str) -> object | None:
        if self.store.directory is None:
            return None
        return self.store.get(self._name(key))

    def put(self, key: str, value: object) -> None:
        if self.store.directory is not None:
            self.store.put(self._name(key), value)

    def trim(self, limit: int = PROGRAM_CACHE_BYTES) -> int:
        """Remove the least recently used entries past `limit` bytes; returns how many."""
        return self.store.trim(limit)
