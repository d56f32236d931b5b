"""A failing pair as the reducer's strategies see it, and what a strategy is.

A strategy (`Strategy`) says whether it applies to a failing pair (by its Result and
config) and reduces it to a bundle or a reason there is none. Each search contributes its
own: the MLIR-level ones (`failure.py`), the FX frontend's (`frontend_graph.py`), the ONNX
model's (`onnx_graph.py`), the TorchScript graph's (`jit_graph.py`); `strategies.py` orders
them into the table the reducer walks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from compiler.stages import snapshot_path

DEFAULT_TIME_BOX = 60.0


@dataclass
class FailingPair:
    result: Any  # e2e.framework.result.Result
    prepared: Any  # e2e.framework.prepared.PreparedTest (None for an IR-only replay)
    config: Any
    reports_dir: Path

    @cached_property
    def frontend(self):  # compiler.frontends.Frontend
        return self.config.toolchain().frontend

    @property
    def ir_dir(self) -> Path:
        """Where the pair's stages saved the IR they were given."""
        return Path(self.reports_dir) / "ir" / self.result.test / self.config.name

    def saved_input(self, stage: str) -> str | None:
        """The IR stage `stage` was given, as the pair's snapshots saved it."""
        saved = snapshot_path(self.ir_dir, stage)
        return saved.read_text() if saved.is_file() else None

    def where(self, time_box: float) -> dict:
        """The keyword arguments every search takes: whose bundle, where, how long."""
        return dict(test=self.result.test, config=self.config.name, reports_dir=self.reports_dir, time_box=time_box)


class Strategy(Protocol):
    name: str  # how its note is introduced when it follows another strategy
    # Also tried when an earlier strategy applied and found no bundle (the TorchScript graph
    # search after the FX graph search); otherwise the first strategy that applies is the only one.
    follows: bool

    def applies(self, pair: FailingPair) -> bool: ...

    def reduce(self, pair: FailingPair, time_box: float) -> Any: ...  # a ReduceOutcome
