"""A result cache across runs: an unchanged test on an unchanged compiler is not rerun;
the frontend cache (a test's capture across runs) and the program cache (lowered programs
across test hosts and runs) are below.

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
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import pickle
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from e2e.framework.platform import torch_cpu_capability
from e2e.framework.result import MEMORY, TIMEOUT, Result

if TYPE_CHECKING:
    from e2e.framework.registry import Test

PROJECT = Path(__file__).resolve().parents[2]
# The project's sources every result may depend on, imported by a test or not.
_SOURCE_DIRS = (
    "compiler",
    "e2e/framework",
    "e2e/configs",
    "e2e/reducer",
    "e2e/onnx_backend",
    "e2e/opinfo",
    "e2e/stablehlo_testdata",
    "e2e/properties",
    "torch_mlir_e2e_test",
)
# Optional packages a result depends on, by version: the ONNX exporter, its cases and the
# oracle; hypothesis (it draws the Property_* tests); transformers (the zoo's models); the runtimes.
_PACKAGES = (
    "onnx",
    "onnxscript",
    "onnxruntime",
    "hypothesis",
    "transformers",
    "iree-base-compiler",
    "iree-base-runtime",
    "jax",
    "jaxlib",
)
# The OpInfo sweep's data, in torch's installed package (not its version alone: a patched
# or locally built torch keeps its version string).
_TORCH_DATA = ("testing/_internal/common_methods_invocations.py", "testing/_internal/opinfo")
_UNCACHED = (TIMEOUT, MEMORY)


@functools.cache
def versions_fingerprint() -> str:
    """torch and torch-mlir versions, torch's kernel ISA (the golden values depend on it), the JIT target,
    torch-mlir's native libraries, the optional packages' versions, torch's OpInfo database,
    this project's sources (xfail sets are not among them: they change how a result is
    judged, not the result)."""
    import torch

    from compiler.replay_runtime.target import jit_target

    # torch's kernels make the golden values; the JIT target, the compiled code's instructions.
    digest = hashlib.sha256(f"{torch.__version__} {torch_cpu_capability()} {jit_target().identity()}".encode())
    digest.update(_torch_mlir_identity().encode())
    for package in _PACKAGES:
        try:
            digest.update(f"{package}=={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            pass
    torch_root = Path(torch.__file__).resolve().parent
    digest.update(tree_digest(torch_root, _TORCH_DATA).encode())
    digest.update(source_digest(*_SOURCE_DIRS).encode())
    return digest.hexdigest()


# Read by `_torch_mlir_identity` only: a benchmark or a test stands for a rebuild of
# torch-mlir by setting it, never touching the installed libraries other processes load.
IDENTITY_SALT_ENV = "E2E_TORCH_MLIR_IDENTITY_SALT"


def _torch_mlir_identity() -> str:
    """torch-mlir's native libraries (a user's own build at the same version differs), its
    Python sources (the FX importer is Python) and `$E2E_TORCH_MLIR_IDENTITY_SALT`."""
    import torch_mlir

    root = Path(next(iter(torch_mlir.__path__)))
    digest = hashlib.sha256(os.environ.get(IDENTITY_SALT_ENV, "").encode())
    for path in sorted((root / "_mlir_libs").glob("*.so*")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    digest.update(tree_digest(root, ("extras",)).encode())
    return digest.hexdigest()


def source_digest(*directories: str) -> str:
    """The `*.py` files under the project's `directories` (relative to the project root)."""
    return tree_digest(PROJECT, directories)


@functools.cache
def tree_digest(root: Path, entries: tuple[str, ...]) -> str:
    """The `*.py` files of `entries` under `root` (each a file or a directory), names and text."""
    digest = hashlib.sha256()
    for entry in entries:
        path = root / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            digest.update(f"{file.relative_to(root).as_posix()}\0{file_digest(file)}\0".encode())
    return digest.hexdigest()


@functools.cache
def file_digest(path: Path) -> str:
    """A file's text, hashed (read once per process)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def forget_files() -> None:
    """Forget what was read from files (each is read once per process): digests, imports,
    the toolchain's fingerprint. For a process that outlives an edit (a test of the cache)."""
    for cached in (
        versions_fingerprint,
        frontend_fingerprint,
        program_fingerprint,
        tree_digest,
        file_digest,
        _imports,
        _closure,
        _files_digest,
    ):
        cached.cache_clear()


# --- what a test depends on ------------------------------------------------------------


# The bundled compiler is a library the tests call, not their own code: what a result owes
# it is in `versions_fingerprint` (every project source), what a capture owes it in
# `FRONTEND_SOURCES`. Followed from a test's imports (the registry imports a tolerance from
# `compiler.replay_runtime`, whose package imports the whole compiler), an edit to a
# lowering would look like an edit to every test and drop every capture.
LIBRARY_DIRS = ("compiler",)


def test_dependencies(test: Test) -> list[Path]:
    """The files `test`'s result depends on by its own code: the file that registered it
    (`Test.origin`), the file that defines what it runs (`Test.defined_in`: its invoker's,
    or a testdata program), and the project and suite modules they import,
    transitively, short of the compiler (`LIBRARY_DIRS`). A suite directory is the
    registering file's; only files in it or under the project root are followed (never
    site-packages)."""
    origin, defined_in = (
        Path(f).resolve() if f and os.path.isfile(f) else None for f in (test.origin, test.defined_in)
    )
    starts = tuple(dict.fromkeys(p for p in (origin, defined_in) if p is not None))
    roots = (PROJECT,) if origin is None else (PROJECT, origin.parent)
    return list(_closure(starts, roots, tuple(PROJECT / name for name in LIBRARY_DIRS)))


test_dependencies.__test__ = False  # not a pytest test, wherever it is imported


def module_dependencies(path: Path) -> list[Path]:
    """`path` and the project and suite modules it imports, transitively (its directory
    being its suite directory): what a suite file's import runs of this project's code."""
    path = Path(path).resolve()
    return list(_closure((path,), (PROJECT, path.parent)))


def files_digest(paths: Iterable[Path]) -> str:
    """The files' names (project-relative where they are the project's) and texts."""
    return _files_digest(tuple(paths))


@functools.cache
def _files_digest(paths: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        name = path.relative_to(PROJECT).as_posix() if path.is_relative_to(PROJECT) else str(path)
        digest.update(f"{name}\0{file_digest(path)}\0".encode())
    return digest.hexdigest()


@functools.cache
def _closure(starts: tuple[Path, ...], roots: tuple[Path, ...], libraries: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """`starts` and what they import, transitively, within `roots` and outside `libraries`
    (a start outside them counts, but what it imports is not followed)."""
    found = dict.fromkeys(starts)
    queue = [path for path in starts if _inside(path, roots)]
    while queue:
        for module in _imports(queue.pop()):
            if module not in found and _inside(module, roots) and not _inside(module, libraries):
                found[module] = None
                queue.append(module)
    return tuple(found)


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


@functools.cache
def _imports(path: Path) -> tuple[Path, ...]:
    """The files `path`'s import statements (anywhere in it) may load: looked for under
    the project root and beside `path` (a suite directory on `sys.path`), relative
    imports under its package; with every package `__init__.py` on the way."""
    absolute = (PROJECT, path.parent)
    found: dict[Path, None] = {}
    for level, module, names in _import_statements(path):
        if level:
            bases = (path.parents[level - 1],) if level <= len(path.parents) else ()
        else:
            bases = absolute
        found.update(dict.fromkeys(_module_files(module, bases)))
        for name in names:  # `from package import module`; `import a.b` has none
            found.update(dict.fromkeys(_module_files([*module, name], bases)))
    found.pop(path, None)
    return tuple(found)


_IMPORTS_DIR: Path | None = None  # where `_import_statements` keeps what it parsed (`keep_imports`)


def keep_imports(directory: Path | None) -> None:
    """Keep each parsed file's import statements in `directory`, by the file's text: parsing
    the suite's 71 modules is a quarter of a second of every command (None: parse each time)."""
    global _IMPORTS_DIR
    _IMPORTS_DIR = directory


def _import_statements(path: Path) -> list[tuple[int, list[str], list[str]]]:
    """(level, dotted module as parts, imported names) per import statement of `path`;
    `import a.b` is (0, [a, b], []). Read from `keep_imports`' directory when there."""
    kept = _IMPORTS_DIR / f"{file_digest(path)[:32]}.json" if _IMPORTS_DIR is not None else None
    if kept is not None:
        try:
            return [(level, module, names) for level, module, names in json.loads(kept.read_text())]
        except (OSError, ValueError, TypeError):
            pass
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    statements = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            statements += [(0, alias.name.split("."), []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module.split(".") if node.module else []
            statements.append((node.level, module, [a.name for a in node.names if a.name != "*"]))
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_suffix(f".{os.getpid()}.partial")
            partial.write_text(json.dumps(statements))
            os.replace(partial, kept)  # another worker may be reading it
        except OSError:
            pass
    return statements


def _module_files(parts: list[str], bases: tuple[Path, ...]) -> list[Path]:
    """The files importing the dotted name `parts` from `bases` runs: each package's
    `__init__.py` on the way and the module itself."""
    files = []
    for base in bases:
        directory = base
        for i, part in enumerate(parts):
            module = directory / f"{part}.py"
            directory = directory / part
            if i == len(parts) - 1 and module.is_file():
                files.append(module)
            if not directory.is_dir():
                break
            if (directory / "__init__.py").is_file():
                files.append(directory / "__init__.py")
    return files


# --- keys and the store --------------------------------------------------------------


def cache_key(test: Test, *parts: str) -> str:
    """The key of a result of `test` that also depends on `parts` (a config, a shape mode,
    ...): the toolchain, the test's name and every file it depends on, the parts."""
    test_part = f"{test.name}\0{files_digest(test_dependencies(test))}"
    return hashlib.sha256("\0".join([versions_fingerprint(), test_part, *parts]).encode()).hexdigest()


def pair_key(test: Test, config: str, shape_mode: str, budget: float) -> str:
    return cache_key(test, config, shape_mode, str(budget))


class JsonStore:
    """JSON objects by key, one file each in `directory` (None: a store that keeps nothing).
    A write is atomic: a reader sees the old entry or the new one, never half of one."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict | None:
        if self.directory is None:
            return None
        try:
            data = json.loads((self.directory / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, data: dict) -> None:
        if self.directory is None:
            return
        path = self.directory / f"{key}.json"
        tmp = path.with_name(f".{key}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


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

# The frontend cache keeps two stages' results, each with its own fingerprint (a
# `FrontendCache` parameter, not a second store): CAPTURE, what torch.export and its
# decompositions make of a test, depends on torch and the capture code, never on
# torch-mlir's build; IMPORT, a result in torch-mlir's dialect, on torch-mlir too.
CAPTURE, IMPORT = "capture", "import"
FRONTEND_STAGES = (CAPTURE, IMPORT)

# What a capture (torch.export, decompositions) runs of this project: its key covers these
# and nothing else of the project, so a rebuild of torch-mlir, a change to the importer, a
# lowering, a pass pipeline or an executor reuses the captures (tests/test_cache.py traces
# a capture and checks that every project file it runs is here).
CAPTURE_SOURCES = (
    "compiler/frontends/__init__.py",
    "compiler/frontends/fx.py",
    "compiler/frontends/decompose.py",
    "compiler/fx_compile.py",
    "compiler/stages.py",
    "compiler/replay_runtime/frontend_step.py",
    "e2e/configs/pipeline.py",
    "e2e/framework/runner.py",
    "e2e/framework/registry.py",
    "e2e/framework/trace.py",
)
# torch-mlir's Python a capture runs: its decomposition table (`get_decomposition_table`),
# which a torch-mlir upgrade may change and a rebuild of its native libraries does not.
TORCH_MLIR_CAPTURE_SOURCES = ("extras/fx_decomp_util.py",)
# What a capture and import (torch.export, decompositions, the FX importer; a lazy or
# TorchScript trace and the JIT IR importer) run of this project: the IMPORT key covers
# these, so a change to a lowering, a pass pipeline or an executor reuses the imports.
FRONTEND_SOURCES = (
    "compiler/frontends",
    "compiler/fx_compile.py",
    "compiler/jit_compile.py",
    "compiler/registry.py",
    "compiler/stages.py",
    "compiler/replay_runtime/frontend_step.py",
    "compiler/replay_runtime/mlir.py",
    "e2e/configs/pipeline.py",
    "e2e/framework/runner.py",
    "e2e/framework/registry.py",
    "e2e/framework/trace.py",
)
FRONTEND_ENTRY_BYTES = 64 << 20  # a larger capture (a big model's weights) is not kept
FRONTEND_CACHE_BYTES = 2 << 30  # the least recently used entries go past this


@functools.cache
def frontend_fingerprint(stage: str = IMPORT) -> str:
    """What a frontend result of `stage` depends on besides its test: torch and the capture's
    sources (its decomposition table among torch-mlir's) for CAPTURE; torch, torch-mlir
    (`_torch_mlir_identity`) and every frontend source for IMPORT."""
    import torch
    import torch_mlir

    if stage == CAPTURE:
        torch_mlir_root = Path(next(iter(torch_mlir.__path__)))
        parts = [
            CAPTURE,
            torch.__version__,
            tree_digest(torch_mlir_root, TORCH_MLIR_CAPTURE_SOURCES),
            source_digest(*CAPTURE_SOURCES),
        ]
    elif stage == IMPORT:
        parts = [IMPORT, torch.__version__, _torch_mlir_identity(), source_digest(*FRONTEND_SOURCES)]
    else:
        raise ValueError(f"unknown frontend stage {stage!r}; known: {', '.join(FRONTEND_STAGES)}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class PickleStore:
    """Python values by key, one pickle file each in `directory` (None: a store that keeps
    nothing), of this user's own cache directory. A write is atomic; an entry larger than
    `entry_bytes` is not kept; `trim` removes the least recently used (read or written)
    past a total size. The frontend cache's and the program cache's store."""

    def __init__(self, directory: Path | None, entry_bytes: int):
        self.directory = directory
        self.entry_bytes = entry_bytes
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def get(self, name: str) -> object | None:
        if self.directory is None:
            return None
        path = self.directory / f"{name}.pickle"
        try:
            value = pickle.loads(path.read_bytes())
            os.utime(path)  # recently used: kept by `trim`
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None
        return value

    def put(self, name: str, value: object) -> None:
        if self.directory is None:
            return
        data = pickle.dumps(value)
        if len(data) > self.entry_bytes:
            return
        path = self.directory / f"{name}.pickle"
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def trim(self, limit: int) -> int:
        """Remove the least recently used entries past `limit` bytes; returns how many."""
        if self.directory is None:
            return 0
        entries = []
        for path in self.directory.glob("*.pickle"):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total, removed = sum(size for _, size, _ in entries), 0
        for _, size, path in sorted(entries):
            if total <= limit:
                break
            path.unlink(missing_ok=True)
            total, removed = total - size, removed + 1
        return removed


class FrontendCache:
    """A test's frontend results across runs, in `directory` (None: disabled): a rerun after
    a change to the compiler's lowerings, passes or executors compiles the import of the run
    before; one after a rebuild of torch-mlir or a change to its importer imports the capture
    of the run before. Each is what the run would compute again. Keyed by the test
    (`cache_key`'s test part: every file it depends on), the shape mode, what was captured
    (method, call shapes, dynamic dims) and `frontend_fingerprint(stage)`, `stage` being
    CAPTURE or IMPORT."""

    def __init__(self, directory: Path | None):
        self.store = PickleStore(directory, FRONTEND_ENTRY_BYTES)

    def _name(self, test: Test, shape_mode: str, key: object, stage: str) -> str:
        test_part = f"{test.name}\0{files_digest(test_dependencies(test))}"
        name = hashlib.sha256("\0".join([frontend_fingerprint(stage), test_part, shape_mode, repr(key)]).encode())
        return name.hexdigest()

    def get(self, test: Test, shape_mode: str, key: object, stage: str = IMPORT) -> object | None:
        if self.store.directory is None:
            return None
        return self.store.get(self._name(test, shape_mode, key, stage))

    def put(self, test: Test, shape_mode: str, key: object, value: object, stage: str = IMPORT) -> None:
        if self.store.directory is not None:
            self.store.put(self._name(test, shape_mode, key, stage), value)

    def trim(self, limit: int = FRONTEND_CACHE_BYTES) -> int:
        """Remove the least recently used entries past `limit` bytes; returns how many."""
        return self.store.trim(limit)


# --- the program cache -------------------------------------------------------------------

PROGRAM_ENTRY_BYTES = 16 << 20  # a larger lowered program is compiled again when needed
PROGRAM_CACHE_BYTES = 1 << 30  # the least recently used entries go past this


@functools.cache
def program_fingerprint() -> str:
    """What a lowered program depends on besides the key its compiler gives it: torch (its
    fake tensors and decompositions), torch-mlir (versions, native libraries, Python
    sources), the JIT target and this project's compiler."""
    import torch

    from compiler.replay_runtime.target import jit_target

    parts = [torch.__version__, _torch_mlir_identity(), jit_target().identity(), source_digest("compiler")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class ProgramCache:
    """Programs the compiler lowered (text the JIT loads; the eager config's single ops,
    `compiler.frontends.eager.LoweredOpStore`), shared by the test hosts of a run and by
    later runs, in `directory` (None: disabled). Keyed by the compiler's key (the op, its
    argument signature, backend and opt level) and `program_fingerprint()`: an edit to
    the compiler, torch or torch-mlir compiles every program again."""

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
