"""linalg-on-tensors (or torch IR, or raw torch-onnx IR, through IREE's own input paths) on IREE's llvm-cpu
backend: `iree-base-compiler` and `iree-base-runtime`, pinned in the `runtimes` extra.

Flags: the local llvm-cpu device for the JIT target's CPU (`replay_runtime.target`;
`device_flags`, which another IREE target overrides), and no f64 -> f32 demotion (without
`--iree-input-demote-f64-to-f32=false` IREE narrows f64 programs, signature included).
"""

from __future__ import annotations

import atexit
import functools
import gc
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from compiler.executors import INSTALL_RUNTIMES, RuntimeExecutor, guarded, outputs_as, to_numpy
from compiler.refbackend import ResultType
from compiler.replay_runtime.target import jit_target
from compiler.stages import Snapshots, StageError

# the IR given -> iree-compile's input type (`onnx`: raw torch-onnx IR, converted by the
# convert-torch-onnx-to-torch IREE carries, as iree-import-onnx's output is)
INPUT_TYPE = {"linalg": "auto", "stablehlo": "stablehlo", "torch": "torch", "onnx": "onnx"}
RUNTIME_DRIVER = "local-sync"
# The HAL element type of complex<f16> (IREE_HAL_ELEMENT_TYPE_COMPLEX_FLOAT_32), which IREE's
# Python enum and numpy lack: such tensors cross as the raw bits of their f16 pairs.
COMPLEX_FLOAT_32 = 0x23000020


def import_runtime():
    """IREE's Python runtime (`iree.runtime`), freed when the process exits."""
    import iree.runtime

    _unfreeze_at_exit()
    return iree.runtime


@functools.cache
def _unfreeze_at_exit() -> None:
    # The e2e plugin freezes the garbage collector once torch and the runtimes are loaded
    # (pytest_configure), and finalization frees no frozen object: IREE's runtime objects
    # then outlive it, and nanobind's leak check prints ~770 "leaked function/type" lines
    # after pytest's summary. Unfrozen at exit they are freed; the collection that costs
    # (~0.5 s) is paid only by processes that loaded IREE. (Forked hosts end in os._exit.)
    atexit.register(gc.unfreeze)


@dataclass
class Iree(RuntimeExecutor):
    input: str = "linalg"  # a key of INPUT_TYPE: which IR it is given
    name: str = "iree"
    title: str = "IREE"  # how reports name it
    accepts: tuple[str, ...] = field(default=tuple(INPUT_TYPE))
    static_only: bool = False
    unheld: tuple = ()  # it holds complex<f16>, as raw bits (`IreeProgram._argument`, `_output`)

    def missing(self) -> str | None:
        try:
            import iree.compiler  # noqa: F401

            import_runtime()
        except ImportError:
            return INSTALL_RUNTIMES
        return None

    def device_flags(self) -> tuple[str, ...]:
        """The local llvm-cpu device, for the JIT target's CPU (not the host: a shift past the
        width or an out-of-range fptoui must read the same on every machine)."""
        return (
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            f"--iree-llvmcpu-target-cpu={jit_target().iree_cpu()}",
        )

    def compile_flags(self) -> list[str]:
        """iree-compile's command-line flags for this input (as a bundle's README gives them):
        the input type, the device, and no f64 demotion."""
        return [
            f"--iree-input-type={INPUT_TYPE[self.input]}",
            *self.device_flags(),
            "--iree-input-demote-f64-to-f32=false",
        ]

    def compile(self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> "IreeProgram":
        import iree.compiler

        text = snapshots.record("lower", backend_module)
        flags = self.compile_flags()
        try:
            vmfb = iree.compiler.compile_str(text, input_type=INPUT_TYPE[self.input], extra_args=flags[1:])
        except iree.compiler.CompilerToolError as error:
            raise StageError("lower", f"iree-compile: {compile_error(str(error))}") from error
        return IreeProgram(vmfb, list(result_dtypes), text, self.compile_flags())


def compile_error(text: str) -> str:
    """What iree-compile said, first line first: its first `error:` diagnostic (location
    dropped), else the signal it died of and the pass it was in, else its first line.
    (`CompilerToolError`'s own first line, "Error invoking IREE compiler tool", names no bug.)"""
    diagnostics = text.partition("Diagnostics:")[2].partition("\nInvoked with:")[0].strip()
    lines = [line.strip() for line in diagnostics.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    if errors:
        first = errors[0][errors[0].index("error:") :]
        return "\n".join([first, *(line for line in lines if line not in errors[:1])])
    code = re.search(r"Error code: (-?\d+)", text)
    if code and int(code[1]) < 0:
        where = re.search(r"(\w+Pass)::runOnOperation\(\)", diagnostics)  # the innermost pass
        return f"crashed (signal {-int(code[1])}) in {where[1] if where else 'iree-compile'}\n{diagnostics}"
    return diagnostics or text.strip()


class IreeProgram:
    def __init__(self, vmfb: bytes, result_dtypes: list[ResultType], source: str = "", flags: Sequence[str] = ()):
        runtime = import_runtime()

        def load():
            context = runtime.SystemContext(config=runtime.Config(RUNTIME_DRIVER))
            context.add_vm_module(runtime.VmModule.copy_buffer(context.instance, vmfb))
            return context

        self.vmfb, self.result_dtypes, self.source, self.flags = vmfb, result_dtypes, source, list(flags)
        self.context = guarded("lower", "IREE runtime (loading the module)", load)

    def __call__(self, *tensors: torch.Tensor) -> list:
        def run():
            outputs = self.context.modules.module["main"](*[self._argument(t) for t in tensors])
            if not isinstance(outputs, (list, tuple)):
                outputs = [] if outputs is None else [outputs]
            return [self._output(o, dtype) for o, dtype in zip(outputs, self.result_dtypes)]

        return outputs_as(guarded("execute", "IREE", run), self.result_dtypes, "IREE")

    def _argument(self, tensor: torch.Tensor):
        """A numpy array; a complex<f16> tensor (numpy has none) as a buffer view of its bits."""
        if tensor.dtype != torch.complex32:
            return to_numpy(tensor)
        runtime, device = import_runtime(), self.context.config.device
        bits = tensor.detach().cpu().contiguous().view(torch.int32).numpy()
        return device.allocator.allocate_buffer_copy(
            memory_type=runtime.MemoryType.DEVICE_LOCAL,
            allowed_usage=runtime.BufferUsage.DEFAULT,
            device=device,
            buffer=bits,
            element_type=COMPLEX_FLOAT_32,
        )

    @staticmethod
    def _output(output, dtype: ResultType):
        if dtype != torch.complex32 or not hasattr(output, "to_host"):
            return output.to_host() if hasattr(output, "to_host") else output
        # `to_host` knows no numpy dtype for it: the mapped buffer read as its 32-bit pairs
        # (DeviceArray keeps its buffer view private; the runtime is pinned).
        view = output._buffer_view
        return np.array(view.map().asarray(view.shape, np.dtype(np.int32)))

    def write_native(self, directory: Path, tensors: Sequence[torch.Tensor]) -> str:
        """program.mlir and input_<i>.npy in `directory`; returns iree-compile and iree-run-module's commands."""
        (directory / "program.mlir").write_text(self.source)
        for i, tensor in enumerate(tensors):
            np.save(directory / f"input_{i}.npy", to_numpy(tensor))
        run = [
            "iree-run-module",
            "--module=program.vmfb",
            f"--device={RUNTIME_DRIVER}",
            "--function=main",
            *[f"--input=@input_{i}.npy" for i in range(len(tensors))],
            *[f"--output=@output_{i}.npy" for i in range(len(self.result_dtypes))],
        ]
        return " ".join(["iree-compile", "program.mlir", *self.flags, "-o", "program.vmfb"]) + "\n" + " ".join(run)

    def close(self) -> None:
        self.context = None
