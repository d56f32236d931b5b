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
from typing import Any, Protocol, Sequence

from compiler.stages import snapshot_path
from e2e.reducer.finish import mismatch_bundle
from e2e.reducer.outcome import ReduceOutcome

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


@dataclass(frozen=True)
class BundleTarget:
    """Whose bundle a search writes, and how: the pair's test and config, the reports
    directory, the tolerance its mismatch was judged by, when the search started, its time
    box, whether the bundle is verified."""

    test: str
    config: str
    reports_dir: Path
    tolerance: Any
    start: float
    time_box: float = DEFAULT_TIME_BOX
    verify: bool = True


@dataclass
class LocalizedMismatch:
    """A mismatch a search localized (the FX graph's, the ONNX model's, the TorchScript
    graph's), as its bundle is written: `found` (its IR, inputs, expected values, dtypes,
    signature, queries), the guilty op, the pass entries that compile its IR, the notes."""

    found: Any
    guilty: str
    to_executor: Sequence[str]
    notes: list[str]
    stopped: str
    original_ir: str = ""
    expected_from: str = "native PyTorch"
    files: dict[str, bytes] | None = None  # written into the bundle too

    def bundle(self, target: BundleTarget) -> ReduceOutcome:
        """Its bundle, or a share of the bundle of the same bug (`finish.mismatch_bundle`)."""
        return mismatch_bundle(
            self.found,
            self.guilty,
            self.to_executor,
            target.tolerance,
            self.notes,
            self.original_ir,
            self.stopped,
            start=target.start,
            test=target.test,
            config=target.config,
            reports_dir=target.reports_dir,
            verify=target.verify,
            time_box=target.time_box,
            expected_from=self.expected_from,
            files=self.files,
        )
