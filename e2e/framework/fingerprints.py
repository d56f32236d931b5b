"""What a cached result depends on besides its test, as fingerprints: the toolchain and
this project's sources for a pair's result (`versions_fingerprint`) and, without
torch-mlir's build, for a suite file's import probe (`probe_fingerprint`), torch and the capture's
or the import's sources for a frontend result (`frontend_fingerprint`), torch, torch-mlir,
the JIT target and the compiler for a lowered program (`program_fingerprint`). Each file is
read and hashed once per process (`e2e.framework.cache.forget_files` forgets)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from importlib import metadata
from pathlib import Path

from e2e.framework.platform import torch_cpu_capability

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


@functools.cache
def versions_fingerprint() -> str:
    """torch and torch-mlir versions, torch's kernel ISA (the golden values depend on it), the JIT target,
    torch-mlir's native libraries, the optional packages' versions, torch's OpInfo database,
    this project's sources (xfail sets are not among them: they change how a result is
    judged, not the result)."""
    import torch

    from compiler.replay_runtime.target import jit_target

    # torch's kernels make the golden values; the JIT target, the compiled code's instructions.
    return _installed_digest(
        f"{torch.__version__} {torch_cpu_capability()} {jit_target().identity()}", _torch_mlir_identity()
    )


@functools.cache
def probe_fingerprint() -> str:
    """What a suite file's import registers depends on besides the file and the project
    modules it imports: `versions_fingerprint` without torch-mlir's native libraries, the
    JIT target and torch's kernel ISA. A rebuild of torch-mlir registers the same tests (a
    new torch-mlir version still probes again)."""
    import torch

    return _installed_digest(f"probe {torch.__version__}", _version("torch-mlir"))


def _installed_digest(*parts: str) -> str:
    """`parts`, then what both fingerprints above share: the optional packages' versions,
    torch's OpInfo database and this project's sources."""
    import torch

    digest = hashlib.sha256("".join(parts).encode())
    for package in _PACKAGES:
        digest.update(_version(package).encode())
    digest.update(tree_digest(Path(torch.__file__).resolve().parent, _TORCH_DATA).encode())
    digest.update(source_digest(*_SOURCE_DIRS).encode())
    return digest.hexdigest()


def _version(package: str) -> str:
    """`name==version`, or "" when the package is not installed."""
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""


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


# --- a frontend result's stages ----------------------------------------------------------

# The frontend cache keeps two stages' results, each with its own fingerprint (a
# `e2e.framework.cache.FrontendCache` parameter, not a second store): CAPTURE, what torch.export and its
# decompositions make of a test, depends on torch and the capture code, never on
# torch-mlir's build; IMPORT, a result in torch-mlir's dialect, on torch-mlir too.
CAPTURE, IMPORT = "capture", "import"
FRONTEND_STAGES = (CAPTURE, IMPORT)

# What every kept capture runs of this project, whatever its frontend: the CAPTURE key covers
# these and the frontend's own `capture_sources` (modules: its capture, and torch-mlir's
# Python it reads, such as the FX capture's decomposition table, which a torch-mlir upgrade
# may change and a rebuild of its native libraries does not), and nothing else, so a rebuild
# of torch-mlir, a change to a lowering, a pass pipeline or an executor reuses the captures
# (tests/test_cache.py traces each frontend's capture and checks that every project file it
# runs is covered).
CAPTURE_SOURCES = (
    "compiler/frontends/__init__.py",
    "compiler/stages.py",
    "compiler/replay_runtime/frontend_step.py",
    "e2e/configs/pipeline.py",
    "e2e/framework/runner.py",
    "e2e/framework/registry.py",
    "e2e/framework/trace.py",
)
# What a capture and import (torch.export, decompositions, the FX importer; a lazy or
# TorchScript trace and the JIT IR importer) run of this project: the IMPORT key covers
# these, so a change to a lowering, a pass pipeline or an executor reuses the imports.
FRONTEND_SOURCES = (
    "compiler/frontends",
    "compiler/registered.py",
    "compiler/stages.py",
    "compiler/replay_runtime/frontend_step.py",
    "compiler/replay_runtime/mlir.py",
    "e2e/configs/pipeline.py",
    "e2e/framework/runner.py",
    "e2e/framework/registry.py",
    "e2e/framework/trace.py",
)


@functools.cache
def frontend_fingerprint(stage: str = IMPORT, capture_sources: tuple[str, ...] = ()) -> str:
    """What a frontend result of `stage` depends on besides its test: torch, `CAPTURE_SOURCES`
    and the files of the modules `capture_sources` names (the frontend's) for CAPTURE; torch,
    torch-mlir (`_torch_mlir_identity`) and every frontend source for IMPORT."""
    import torch

    if stage == CAPTURE:
        parts = [CAPTURE, torch.__version__, source_digest(*CAPTURE_SOURCES)]
        files = {name: module_file(name) for name in capture_sources}
        parts += [f"{name}\0{file_digest(path) if path else 'missing'}" for name, path in files.items()]
    elif stage == IMPORT:
        parts = [IMPORT, torch.__version__, _torch_mlir_identity(), source_digest(*FRONTEND_SOURCES)]
    else:
        raise ValueError(f"unknown frontend stage {stage!r}; known: {', '.join(FRONTEND_STAGES)}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def module_file(name: str) -> Path | None:
    """The source file of module `name`, found without running it (its package is imported);
    None when it is not installed (another torch-mlir may not ship it: the key says
    "missing", as for a missing file, and the capture itself says what it lacks)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its package is not installed
        return None
    return Path(spec.origin) if spec is not None and spec.origin is not None else None


@functools.cache
def program_fingerprint() -> str:
    """What a lowered program depends on besides the key its compiler gives it: torch (its
    fake tensors and decompositions), torch-mlir (versions, native libraries, Python
    sources), the JIT target and this project's compiler."""
    import torch

    from compiler.replay_runtime.target import jit_target

    parts = [torch.__version__, _torch_mlir_identity(), jit_target().identity(), source_digest("compiler")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()
