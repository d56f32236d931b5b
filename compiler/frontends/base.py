"""`BaseFrontend`: what the frontends (`compiler.frontends`) share."""

from __future__ import annotations

from typing import Any, Sequence

from compiler import pipelines
from compiler.backend_compile import torch_backend_ir
from compiler.frontends import Imported, ReducerFacts


class BaseFrontend:
    """What the frontends share: a frontend that imports torch IR, lowered to the backend
    contract by the FX pipeline (keeping the backend's legal ops whole), with no optional
    packages, no given models, no warm-up and no reducer beyond the FX graph search. A
    frontend overrides what differs (its name, capture and import at least)."""

    name: str
    imported_ir = "torch"
    imported_ir_words = "raw torch"
    raw_conversion: str | None = None
    keeps: str | None = None
    reducer = ReducerFacts()

    def to_torch_backend(self, backend: str) -> tuple[str, ...]:
        """Keeping `backend`'s legal ops whole, as upstream's FX configs do."""
        return pipelines.fx_to_torch_backend(pipelines.BACKEND_LEGAL_OPS.get(backend, ()))

    def missing(self) -> str | None:
        return None

    def given(self, module: Any) -> Any:
        return None

    def capture(self, module: Any, inputs: Sequence[object], dynamic_dims: Any, method: str, snapshots: Any) -> Any:
        raise NotImplementedError

    def import_capture(self, captured: Any, snapshots: Any) -> Imported:
        raise NotImplementedError

    def torch_backend_ir(self, imported: Imported, pipeline: tuple[str, ...], snapshots: Any) -> str:
        return torch_backend_ir(imported.raw_ir, snapshots=snapshots, pipeline=pipeline)

    def producer(self, ir_name: str) -> str:
        """What made the IR an executor is given, for a verdict's words."""
        return f"torch -> {ir_name}"

    def warm_up(self) -> None:
        """Nothing by default."""

    def warm_up_capture(self) -> None:
        """Nothing: only the FX capture's initialization is paid while a collection probes."""

    def spare_warm_up(self) -> tuple:
        """What a spare host (`e2e.framework.host.SpareHost`) pays for this frontend before its
        test is known, in steps it may stop between; nothing by default."""
        return ()

    def check(self, module: Any, inputs: Sequence[object], dynamic_dims: Any) -> None:
        raise NotImplementedError(f"the {self.name} frontend's capture failures are not reduced")
