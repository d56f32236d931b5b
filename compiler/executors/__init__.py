"""Executors: what runs a backend IR program. The RefBackend is one executor among several.

    executor = load_executor("iree", input="linalg")
    program = executor.program_for(backend_module, result_dtypes, snapshots)   # stage `lower`
    outputs = program(*tensors)                                                # stage `execute`
    program.close()

An executor is given the IR of one dialect (`input`, one of `accepts`), compiles it in
stage `lower` (raising `StageError`), and returns a program callable with torch tensors
that returns tensors of `result_dtypes` (or Python scalars). It owns what differs between
executors, so no caller branches on its name:

- `lower_entries()`: stage `lower` as pass entries, from its input IR to what it runs (the
  RefBackend: its conversion to linalg and the LLVM passes; a runtime: its replay entry,
  `compiler.executors.replay`), which the reducer replays;
- `execute_entries()`: stage `execute` as pass entries: compile as `lower` does, then call
  @main once on made-up inputs, on this executor (the RefBackend: its JIT; a runtime: its
  `_run` replay entry), which the reducer replays an execute crash with;
- `program_for(...)`: compile, with failures blamed on those entries (a runtime's errors
  name its replay entry as the failing pass, so a result's signature and its replay agree);
- `missing()`: None, or what to install: a config whose executor is missing is skipped
  with that line as its reason.

Executors are registered by name in `EXECUTORS` (module:attribute, imported when used:
runtimes are heavy) or by an installed package's `e2e_conformance.executors` entry point.
Real runtimes derive from `RuntimeExecutor`.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import torch

from compiler.refbackend import ResultType, UnsupportedDType
from compiler.registered import registered_class
from compiler.stages import Snapshots, StageError

INSTALL_RUNTIMES = 'pip install -e ".[runtimes]"'

# executor name -> module:attribute of its class (imported only when used: runtimes are heavy)
EXECUTORS: dict[str, str] = {
    "refbackend": "compiler.executors.refbackend:RefBackend",
    "tosa-ref": "compiler.executors.tosa_ref:TosaReferenceModel",
    "xla": "compiler.executors.xla:Xla",
    "interp": "compiler.executors.interp:Interpreter",
    "iree": "compiler.executors.iree:Iree",
    "iree-vmvx": "compiler.executors.iree_vmvx:IreeVmvx",
}


@runtime_checkable
class Program(Protocol):
    def __call__(self, *tensors: torch.Tensor) -> list[Any]: ...

    def close(self) -> None: ...


ENTRY_POINTS = "e2e_conformance.executors"


@runtime_checkable
class Executor(Protocol):
    name: str
    accepts: tuple[str, ...]  # IRs it compiles: "linalg", "tosa", "stablehlo", "torch", "onnx"
    input: str  # the one it is given

    def missing(self) -> str | None:
        """None when the runtime is usable; else what to run to install it."""

    def compile(self, backend_module: Any, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> Program:
        """The program, from `backend_module` (stage `lower`)."""

    def lower_entries(self) -> tuple[str, ...]:
        """Stage `lower` as pass entries: what the reducer replays."""

    def execute_entries(self) -> tuple[str, ...]:
        """Stage `execute` as pass entries (compile, then call @main once on made-up inputs):
        what the reducer replays an execute failure with, on this executor."""

    def program_for(
        self, backend_module: Any, result_dtypes: Sequence[ResultType], snapshots: Snapshots, opt_level: int = 0
    ) -> Program:
        """`compile`, its failures blamed on `lower_entries` (`opt_level`: the JIT's, where there is one)."""


def executor_class(name: str) -> type:
    """The class registered as executor `name` (built in, or an installed entry point)."""
    return registered_class("executor", EXECUTORS, ENTRY_POINTS, name)


def load_executor(name: str, input: str | None = None) -> Executor:
    """Executor `name`, configured for the IR `input` (default: the first it accepts)."""
    cls = executor_class(name)
    return cls(input=input or cls.accepts[0])


def runtime_executors() -> dict[str, type]:
    """The built-in executors that are real runtimes, by name."""
    return {name: cls for name in EXECUTORS if issubclass(cls := executor_class(name), RuntimeExecutor)}


class RuntimeExecutor:
    """A real runtime: its stage `lower` is one replay entry (`compiler.executors.replay`),
    which compiles on the runtime, and its errors, at compile and at run, name that entry."""

    name: str
    title: str  # how reports name it ("IREE")
    input: str
    # It computes what its IR's spec says (a reference interpreter): a wrong result there
    # while the RefBackend twin matches torch means the program is wrong by the spec.
    by_the_spec: bool = False
    # dtypes its Python interface cannot return (numpy has no complex32): refused at `lower`
    unheld: tuple[torch.dtype, ...] = (torch.complex32,)

    def lower_entries(self) -> tuple[str, ...]:
        from compiler.executors import replay

        return (replay.entry(self.name, self.input),)

    def execute_entries(self) -> tuple[str, ...]:
        from compiler.executors import replay

        return (replay.entry(self.name, self.input, run=True),)

    def program_for(self, backend_module, result_dtypes, snapshots, opt_level: int = 0):
        from compiler.executors import replay
        from compiler.stages import module_text

        backend_ir = module_text(backend_module)
        with replay.blamed(self.name, self.input, backend_ir):
            refuse_unheld(result_dtypes, self.title, self.unheld)
            program = self.compile(backend_module, result_dtypes, snapshots)
        return replay.BlamedProgram(program, self.name, self.input, backend_ir)


# --- marshalling shared by the runtimes (numpy in, numpy out) ---------------------------


# torch dtypes numpy lacks, -> the ml_dtypes type a runtime takes them as (bits unchanged)
ML_DTYPES = {
    torch.bfloat16: "bfloat16",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e4m3fnuz: "float8_e4m3fnuz",
    torch.float8_e5m2: "float8_e5m2",
    torch.float8_e5m2fnuz: "float8_e5m2fnuz",
}


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A torch tensor as the numpy array a runtime takes (bf16 and float8 as ml_dtypes' types,
    which come with the runtimes). complex32 has no numpy or ml_dtypes type: UnsupportedDType."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype in ML_DTYPES:
        import ml_dtypes

        bits = torch.int16 if tensor.dtype == torch.bfloat16 else torch.uint8
        return tensor.view(bits).numpy().view(getattr(ml_dtypes, ML_DTYPES[tensor.dtype]))
    if tensor.dtype == torch.complex32:
        raise UnsupportedDType("numpy (and ml_dtypes) has no complex32: a runtime is given numpy arrays")
    return tensor.numpy()


def from_numpy(array: Any, dtype: ResultType, what: str) -> Any:
    """A runtime's output as the torch dtype (or scalar type) the program's signature says."""
    array = np.asarray(array)
    if not isinstance(dtype, torch.dtype):  # a scalar result
        return dtype(array.item())
    if dtype == torch.complex32:  # its bits: numpy has no complex32
        if array.dtype.itemsize != 4:
            raise StageError(
                "execute", f"{what}: the runtime returned {array.dtype}, the program's signature says {dtype}"
            )
        return torch.from_numpy(np.array(array).view(np.int32)).view(torch.complex32)
    if dtype in ML_DTYPES:  # an ml_dtypes array, or its bits
        bits = np.int16 if dtype == torch.bfloat16 else np.uint8
        if array.dtype.itemsize != np.dtype(bits).itemsize:
            raise StageError(
                "execute", f"{what}: the runtime returned {array.dtype}, the program's signature says {dtype}"
            )
        return torch.from_numpy(np.array(array).view(bits)).view(dtype)
    expected = torch.empty((), dtype=dtype).numpy().dtype
    if array.dtype != expected:
        if array.dtype.itemsize != expected.itemsize and array.dtype.kind != expected.kind:
            raise StageError(
                "execute", f"{what}: the runtime returned {array.dtype}, the program's signature says {dtype}"
            )
        array = array.astype(expected)  # e.g. bool returned as uint8, or a signless integer
    # A copy (writable) in the very dtype torch has: numpy's `ulonglong` equals `uint64` but
    # torch.from_numpy refuses it (jaxlib returns ui64 results as ulonglong).
    return torch.from_numpy(np.array(array).view(expected))


def refuse_unheld(result_dtypes: Sequence[ResultType], runtime: str, unheld: Sequence[torch.dtype]) -> None:
    """Stage `lower` refuses a program with a result the runtime's numpy interface cannot return."""
    for i, dtype in enumerate(result_dtypes):
        if dtype in unheld:
            raise StageError(
                "lower",
                f"{runtime} cannot return result {i}: its Python interface returns numpy arrays, "
                f"and numpy has no {dtype}",
            )


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
