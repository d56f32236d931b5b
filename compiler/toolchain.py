"""A config's compiler as data: frontend, backend, executor, and per stage the passes from
that stage's input IR down to what the executor takes.

Every config compiles with exactly these pipelines (its frontend's `to_torch_backend`;
`to_backend`, and the `executor` through `compile_backend_ir`), and the reducer replays a failure through `stages[stage]`, so the two cannot drift. The last
part of each stage's list is the executor's own (`Executor.lower_entries`): for the
RefBackend it ends in LLVM; for a runtime it is the Python pass entry that compiles on that
runtime (`compiler.executors.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compiler import pipelines
from compiler.executors import executor_class, load_executor
from compiler.frontends import Frontend, load_frontend

# A backend name for executors that take the torch backend contract or raw torch IR
# themselves (IREE's torch and onnx input paths): no backend pipeline, no torch-backend stage.
TORCH_INPUT = "torch"


@dataclass(frozen=True)
class Toolchain:
    frontend: Frontend  # `compiler.frontends`
    backend: str  # a key of pipelines.BACKENDS, or TORCH_INPUT
    executor: Any = field(compare=False)  # `compiler.executors.Executor`, configured for `executor_input`
    executor_name: str = "refbackend"  # a key of compiler.executors.EXECUTORS

    @property
    def to_torch_backend(self) -> pipelines.Pipeline:
        """Imported IR -> torch backend contract (the frontend's, for this backend)."""
        return self.frontend.to_torch_backend(self.backend)

    @property
    def to_backend(self) -> pipelines.Pipeline:
        return () if self.backend == TORCH_INPUT else pipelines.BACKENDS[self.backend][0]

    @property
    def executor_input(self) -> str:
        """The IR the executor is handed: the backend's, or with TORCH_INPUT the frontend's
        imported IR as it is (raw torch IR, or the ONNX frontend's torch-onnx IR)."""
        return executor_input(self.frontend, self.backend)

    @property
    def lower(self) -> pipelines.Pipeline:
        """Backend IR -> what the executor runs: the executor's own entries."""
        return self.executor.lower_entries()

    @property
    def stages(self) -> dict[str, tuple[str, ...]]:
        """stage -> passes from that stage's input to the executor; `execute` (given what
        `lower` is given): compiled and called once on made-up inputs, by the executor itself."""
        execute = self.executor.execute_entries()
        if self.backend == TORCH_INPUT:  # the executor takes torch IR itself (raw, or the backend contract)
            return {"backend": self.lower, "lower": self.lower, "execute": execute}
        return {
            "torch-backend": (*self.to_torch_backend, *self.to_backend, *self.lower),
            "backend": (*self.to_backend, *self.lower),
            "lower": self.lower,
            "execute": execute,
        }


def executor_input(frontend: Frontend, backend: str) -> str:
    return frontend.imported_ir if backend == TORCH_INPUT else backend


def toolchain(frontend: str | Frontend, backend: str, executor: str = "refbackend") -> Toolchain:
    """The toolchain of a frontend (object or registered name), backend and executor (name)."""
    frontend = load_frontend(frontend) if isinstance(frontend, str) else frontend
    if backend not in pipelines.BACKENDS and not (
        backend == TORCH_INPUT and TORCH_INPUT in executor_class(executor).accepts
    ):
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(pipelines.BACKENDS)}")
    return Toolchain(frontend, backend, load_executor(executor, input=executor_input(frontend, backend)), executor)


def split_executor(entries: list[str] | tuple[str, ...]) -> tuple[list[str], tuple[str, str] | None]:
    """A stage's entries -> (passes, (executor, backend) or None when they end in LLVM)."""
    from compiler.executors import replay

    if entries and (found := replay.parse(entries[-1])) is not None:
        return list(entries[:-1]), found[:2]
    return list(entries), None
