"""The RefBackend as an executor: backend IR -> (the backend's own conversion to linalg)
-> LLVM -> MLIR's ExecutionEngine (`compiler.refbackend`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from compiler import pipelines
from compiler.refbackend import RefBackendProgram, ResultType, compile_linalg
from compiler.stages import Snapshots


@dataclass
class RefBackend:
    backend: str = "linalg"  # which dialect it is given: picks the conversion to linalg
    opt_level: int = 0
    name: str = "refbackend"
    accepts: tuple[str, ...] = ("linalg", "tosa", "stablehlo")

    def missing(self) -> str | None:
        return None

    def compile(self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> RefBackendProgram:
        to_linalg = pipelines.BACKENDS[self.backend][1]
        return compile_linalg(
            backend_module, result_dtypes, to_linalg=to_linalg, snapshots=snapshots, opt_level=self.opt_level
        )
