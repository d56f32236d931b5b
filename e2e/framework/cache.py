"""A result cache across runs: an unchanged test on an unchanged compiler is not rerun.

A pair's key hashes everything that decides its result: the test's name and the text
of the file that defines it, the config, the shape mode, the versions of torch and
torch-mlir (and of the onnx packages, where installed) and the identity of torch-mlir's
native libraries (a user's own build at the same version still changes the key), and the sources of this project's compiler and
framework. Timeouts and memory-cap kills depend on the machine's load and are never
cached. Entries are small JSON files under pytest's cache directory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

from e2e.framework.platform import torch_cpu_capability
from e2e.framework.result import MEMORY, TIMEOUT, Result

_PROJECT = Path(__file__).resolve().parents[2]
_SOURCE_DIRS = ("compiler", "e2e/framework", "e2e/configs", "e2e/reducer", "e2e/onnx_backend")
# Optional packages a result depends on (the ONNX exporter, its cases, the oracle), by version.
_PACKAGES = ("onnx", "onnxscript", "onnxruntime")
_UNCACHED = (TIMEOUT, MEMORY)


@functools.cache
def toolchain_fingerprint() -> str:
    """torch and torch-mlir versions, torch's kernel ISA (the golden values depend on it), the JIT target,
    torch-mlir's native libraries, the onnx packages' versions, this project's sources
    (xfail sets are not among them: they change how a result is judged, not the result)."""
    import torch
    import torch_mlir

    from compiler.replay_runtime.target import jit_target

    # torch's kernels make the golden values; the JIT target, the compiled code's instructions.
    digest = hashlib.sha256(f"{torch.__version__} {torch_cpu_capability()} {jit_target()}".encode())
    libs = Path(next(iter(torch_mlir.__path__))) / "_mlir_libs"
    for path in sorted(libs.glob("*.so*")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for package in _PACKAGES:
        try:
            digest.update(f"{package}=={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            pass
    for directory in _SOURCE_DIRS:
        for path in sorted((_PROJECT / directory).rglob("*.py")):
            digest.update(path.relative_to(_PROJECT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def pair_key(test_name: str, test_source: str, config: str, shape_mode: str, budget: float) -> str:
    source_file = test_source.rsplit(":", 1)[0]
    parts = [toolchain_fingerprint(), test_name, _file_digest(source_file), config, shape_mode, str(budget)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class ResultCache:
    """Results by pair key, in `directory` (None: disabled)."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> Result | None:
        if self.directory is None:
            return None
        try:
            data = json.loads((self.directory / f"{key}.json").read_text())
            result = Result(**data)
        except (OSError, ValueError, TypeError):
            return None
        if result.repro_path and not Path(result.repro_path).exists():
            result.notes.append(f"the reproducer of an earlier run is gone ({result.repro_path})")
            result.repro_path = None
        result.cached = True
        return result

    def put(self, key: str, result: Result) -> None:
        if self.directory is None or result.outcome in _UNCACHED or result.cached:
            return
        path = self.directory / f"{key}.json"
        tmp = path.with_name(f".{key}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result.to_json()))
        os.replace(tmp, path)
