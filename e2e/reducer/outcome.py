"""What a reduction ended with: its bundle, its sizes and why it stopped.

Its own module so that every search (MLIR, FX graph, frontend) reports in the same
terms without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Why a reduction stopped (ReduceOutcome.stopped)
NO_LOCALIZATION = "no localization"


@dataclass
class ReduceOutcome:
    bundle: Path | None = None
    verified: bool = False
    shared: bool = False  # an earlier failure with the same signature wrote the bundle
    ops_before: int = 0
    ops_after: int = 0
    queries: int = 0
    seconds: float = 0.0
    guilty_op: str | None = None
    note: str = ""
    details: list[str] = field(default_factory=list)
    stopped: str = ""  # 1-minimal | time box | no localization | crash | shared
    verify_seconds: float = 0.0  # of `seconds`, re-verifying the bundle in a fresh process

    def summary(self) -> str:
        """One line for Result.notes (the benchmark parses the key=value pairs)."""
        if self.bundle is None:
            return f"reducer: no bundle: stopped={self.stopped.replace(' ', '-') or '-'} {self.note}"
        guilty = (self.guilty_op or "-").replace(" ", "")
        return (
            f"reducer: bundle={self.bundle} verified={self.verified} shared={self.shared} "
            f"ops_before={self.ops_before} ops_after={self.ops_after} queries={self.queries} "
            f"seconds={self.seconds:.2f} verify_seconds={self.verify_seconds:.2f} stopped={self.stopped.replace(' ', '-') or '-'} guilty_op={guilty}"
        )
