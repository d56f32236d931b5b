"""Executors: what runs a backend IR program. The RefBackend is one executor among several.

    executor = load_executor("iree")
    program = executor.compile(backend_module, result_dtypes, snapshots)   # stage `lower`
    outputs = program(*tensors)                                            # stage `execute`
    program.close()

An executor takes the IR of one backend dialect (`accepts`), compiles it in stage
`lower` (raising `StageError`), and returns a program callable with torch tensors that
returns tensors of `result_dtypes` (or Python scalars). Executors of real runtimes need
packages outside the core install: `missing()` says what to install, and a config whose
executor is missing is skipped with that line as its reason.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import torch

from compiler.refbackend import ResultType
from compiler.stages import Snapshots, StageError

INSTALL_RUNTIMES = 'pip install -e ".[runtimes]"'

# executor name -> module:attribute of its class (imported only when used: runtimes are heavy)
EXECUTORS: dict[str, str] = {
    "refbackend": "compiler.executors.refbackend:RefBackend",
    "tosa-ref": "compiler.executors.tosa_ref:TosaReferenceModel",
    "xla": "compiler.executors.xla:Xla",
    "interp": "compiler.executors.interp:Interpreter",
    "iree": "compiler.executors.iree:Iree",
}


@runtime_checkable
class Program(Protocol):
    def __call__(self, *tensors: torch.Tensor) -> list[Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class Executor(Protocol):
    name: str
    accepts: tuple[str, ...]  # backend IRs it compiles: "linalg", "tosa", "stablehlo", "torch"

    def missing(self) -> str | None:
        """None when the runtime is usable; else what to run to install it."""

    def compile(self, backend_module: Any, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> Program: ...


def load_executor(name: str, **options: Any) -> Executor:
    try:
        module, _, attribute = EXECUTORS[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}") from None
    return getattr(importlib.import_module(module), attribute)(**options)


# --- marshalling shared by the runtimes (numpy in, numpy out) ---------------------------


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A torch tensor as the numpy array a runtime takes (bf16 as ml_dtypes.bfloat16)."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def from_numpy(array: Any, dtype: ResultType, what: str) -> Any:
    """A runtime's output as the torch dtype (or scalar type) the program's signature says."""
    array = np.asarray(array)
    if not isinstance(dtype, torch.dtype):  # a scalar result
        return dtype(array.item())
    if dtype == torch.bfloat16:
        return torch.from_numpy(np.array(array).view(np.int16)).view(torch.bfloat16)
    expected = torch.empty((), dtype=dtype).numpy().dtype
    if array.dtype != expected:
        if array.dtype.itemsize != expected.itemsize and array.dtype.kind != expected.kind:
            raise StageError(
                "execute", f"{what}: the runtime returned {array.dtype}, the program's signature says {dtype}"
            )
        array = array.astype(expected)  # e.g. bool returned as uint8, or a signless integer
    return torch.from_numpy(np.array(array))  # a writable copy


def outputs_as(arrays: Sequence[Any], dtypes: Sequence[ResultType], runtime: str) -> list[Any]:
    if len(arrays) != len(dtypes):
        raise StageError("execute", f"{runtime} returned {len(arrays)} results; the program has {len(dtypes)}")
    return [from_numpy(a, d, f"{runtime} result {i}") for i, (a, d) in enumerate(zip(arrays, dtypes))]


def guarded(stage: str, runtime: str, call: Callable[[], Any]) -> Any:
    """Run `call`; any exception but a StageError becomes one of `stage`, naming the runtime."""
    try:
        return call()
    except StageError:
        raise
    except Exception as error:
        raise StageError(stage, f"{runtime}: {type(error).__name__}: {str(error).strip()[:4000]}") from error
