"""StableHLO on XLA's CPU client, through jax (`jax[cpu]`, pinned in the `runtimes` extra).

What XLA needs that torch-mlir's output is not, and the workaround a StableHLO user applies:
- constants as `dense<...>`: XLA refuses `dense_resource` ("Only dense elements attr are
  supported"), so resource blobs are inlined (the blob's 4-byte alignment header dropped);
- StableHLO ops only: tensor `arith.constant`s become `stablehlo.constant`;
- a StableHLO version it reads: jaxlib 0.10.2 reads up to 1.17.0 and torch-mlir writes
  1.19.0, so the module goes as a portable (VHLO) artifact downgraded to the smaller one;
- x64 enabled, or int64/f64 arguments are narrowed silently;
- the JIT target's instruction set (`--xla_cpu_max_isa`), not the host's, set before jax
  starts its CPU client.
Static shapes only: torch-mlir's shape-computation ops do not serialize to VHLO.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from compiler.executors import INSTALL_RUNTIMES, RuntimeExecutor, guarded, outputs_as, to_numpy
from compiler.refbackend import ResultType
from compiler.replay_runtime.target import jit_target
from compiler.stages import Snapshots, StageError, new_context, parse_module

XLA_STABLEHLO_VERSION = "1.17.0"  # the newest StableHLO jaxlib 0.10.2 reads
_RESOURCE = re.compile(r"dense_resource<([^>]+)>")
_BLOB = re.compile(r'^\s*("?)([^\s":]+)\1\s*:\s*"0x([0-9A-Fa-f]*)"', re.M)


def xla_ready_text(stablehlo_text: str) -> str:
    """torch-mlir's StableHLO with resource constants inlined and tensor arith constants as StableHLO ones."""
    body, _, resources = stablehlo_text.partition("{-#")
    blobs = {name: data for _, name, data in _BLOB.findall(resources)}

    def inline(match: re.Match) -> str:
        if match[1] not in blobs:
            raise StageError("lower", f"resource {match[1]} has no blob in the module")
        return f'dense<"0x{blobs[match[1]][8:]}">'

    body = _RESOURCE.sub(inline, body)
    return re.sub(r"= arith\.constant (dense<[^\n]*?: tensor<)", r"= stablehlo.constant \1", body)


def portable_artifact(stablehlo_text: str) -> bytes:
    from torch_mlir._mlir_libs import _stablehlo

    module = parse_module(xla_ready_text(stablehlo_text), new_context())
    target = _stablehlo.get_smaller_version(_stablehlo.get_current_version(), XLA_STABLEHLO_VERSION)
    return _stablehlo.serialize_portable_artifact(module, target)


@dataclass
class Xla(RuntimeExecutor):
    input: str = "stablehlo"
    name: str = "xla"
    title: str = "XLA"  # how reports name it
    accepts: tuple[str, ...] = ("stablehlo",)
    static_only: bool = True

    def missing(self) -> str | None:
        try:
            import jax  # noqa: F401
        except ImportError:
            return INSTALL_RUNTIMES
        return None

    def compile(self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> "XlaProgram":
        text = snapshots.record("lower", backend_module)
        artifact = guarded("lower", "StableHLO serialization", lambda: portable_artifact(text))
        pin_isa()
        import jax

        jax.config.update("jax_enable_x64", True)
        from jax.extend.backend import get_backend

        devices = jax.devices("cpu")
        executable = guarded("lower", "XLA", lambda: get_backend("cpu").compile_and_load(artifact, devices))
        return XlaProgram(executable, devices[0], list(result_dtypes), text, artifact)


class XlaProgram:
    def __init__(self, executable, device, result_dtypes: list[ResultType], source: str = "", artifact: bytes = b""):
        self.executable, self.device, self.result_dtypes = executable, device, result_dtypes
        self.source, self.artifact = source, artifact

    def __call__(self, *tensors: torch.Tensor) -> list:
        import jax
        import numpy as np

        def run():
            buffers = [jax.device_put(to_numpy(t), self.device) for t in tensors]
            return [np.asarray(out) for out in self.executable.execute(buffers)]

        return outputs_as(guarded("execute", "XLA", run), self.result_dtypes, "XLA")

    def write_native(self, directory: Path, tensors: Sequence[torch.Tensor]) -> str:
        """The StableHLO XLA takes (text, and the portable artifact XLA was given), inputs, and
        run_xla.py (jax only); returns its command."""
        import numpy as np

        (directory / "program.mlir").write_text(xla_ready_text(self.source))
        (directory / "program.vhlo.mlirbc").write_bytes(self.artifact)
        for i, tensor in enumerate(tensors):
            np.save(directory / f"input_{i}.npy", to_numpy(tensor))
        (directory / "run_xla.py").write_text(RUN_XLA.format(inputs=len(tensors)).replace("{xla_flags}", pin_isa()))
        return "python run_xla.py"

    def close(self) -> None:
        self.executable = None


def pin_isa() -> str:
    """XLA_FLAGS with the JIT target's instruction set (read when jax starts its CPU client)."""
    isa = jit_target().xla_isa
    flags = os.environ.get("XLA_FLAGS", "")
    if isa and "--xla_cpu_max_isa" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_max_isa={isa}".strip()
    return os.environ.get("XLA_FLAGS", "")


RUN_XLA = '''"""Run program.vhlo.mlirbc (StableHLO {version}, as a portable artifact) on XLA's CPU client."""
import os
os.environ["XLA_FLAGS"] = "{{xla_flags}}"
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from jax.extend.backend import get_backend
device = jax.devices("cpu")[0]
executable = get_backend("cpu").compile_and_load(open("program.vhlo.mlirbc", "rb").read(), [device])
inputs = [jax.device_put(np.load(f"input_{{i}}.npy"), device) for i in range({inputs})]
for i, output in enumerate(executable.execute(inputs)):
    np.save(f"output_{{i}}.npy", np.asarray(output))
'''.replace("{version}", XLA_STABLEHLO_VERSION)
