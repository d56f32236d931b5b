"""The RefBackend as an executor: backend IR -> (the backend's own conversion to linalg)
-> LLVM -> MLIR's ExecutionEngine (`compiler.refbackend`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from compiler import pipelines
from compiler.refbackend import (
    LOWER_PIPELINE,
    RefBackendProgram,
    ResultType,
    compile_linalg,
)
from compiler.replay_runtime import passes
from compiler.stages import Snapshots

# The reference backend's boundary rewrite, as a pass entry (`lower_to_llvm` runs it first).
BOUNDARY_AS_BITS = "python:compiler.replay_runtime.engine:boundary_as_bits"


@dataclass
class RefBackend:
    input: str = "linalg"  # which dialect it is given: picks the conversion to linalg
    opt_level: int = 0
    name: str = "refbackend"
    title: str = "the RefBackend"
    accepts: tuple[str, ...] = ("linalg", "tosa", "stablehlo")

    def missing(self) -> str | None:
        return None

    def lower_entries(self) -> tuple[str, ...]:
        """The backend's conversion to linalg, then linalg -> LLVM; the JIT loads the result."""
        return (BOUNDARY_AS_BITS, *pipelines.BACKENDS[self.input][1], *LOWER_PIPELINE)

    def execute_entries(self) -> tuple[str, ...]:
        """`lower_entries` framed by @main's signature, kept before lowering erases it, and a
        call of the JIT-compiled @main on inputs made from it (`replay_runtime.passes`)."""
        return (passes.RECORD, *self.lower_entries(), passes.INVOKE)

    def compile(self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> RefBackendProgram:
        return self.program_for(backend_module, result_dtypes, snapshots, self.opt_level)

    def program_for(
        self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots, opt_level: int = 0
    ) -> RefBackendProgram:
        """The program at `opt_level` (its pass failures name their passes already)."""
        return compile_linalg(
            backend_module, result_dtypes, to_linalg=self._to_linalg, snapshots=snapshots, opt_level=opt_level
        )

    @property
    def _to_linalg(self) -> tuple[str, ...]:
        """The input's own conversion to linalg-on-tensors (TOSA, StableHLO), the first part of `lower`."""
        return tuple(pipelines.BACKENDS[self.input][1])
