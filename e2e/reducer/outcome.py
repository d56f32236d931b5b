"""What a reduction ended with: its bundle, its sizes and why it stopped.

Its own module so that every search (MLIR, FX graph, frontend) reports in the same
terms without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# A bundle's record of its own verification, as fields (written by `e2e.reducer.bundle`,
# read by the reproducer service).
BUNDLE_RECORD = "bundle.json"

# Why a reduction stopped (ReduceOutcome.stopped): nothing localized, or the failure joined
# the bundle an earlier failure of the same bug wrote.
NO_LOCALIZATION = "no localization"
SHARED = "shared"


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
    stopped: str = ""  # 1-minimal | time box | no localization | crash | shared | not run
    verify_seconds: float = 0.0  # of `seconds`, re-verifying the bundle in a fresh process
    # The step after which the torch dialect's types first disagree with what its ops
    # compute (`compiler.type_check`), when the failing pass only tripped over them.
    types_broke: str | None = None
    type_check_failed: str | None = None  # why the type check gave no answer (a pass crashed or hung)
    types_bundle: str | None = None  # the bundle that starts where the types still agreed, in words
    types_root: str | None = None  # what broke them, whatever the step: one bug across steps and configs
    # The step the bundle fails in: its case's last pipeline entry (with the guilty op, a
    # bug's root: `e2e.fuzz.bugs.Bug.root`).
    failing_step: str | None = None

    @classmethod
    def not_reduced(cls, why: str) -> "ReduceOutcome":
        """No reduction ran, or it ended without an answer (the reducer's host or child gone):
        why, in words (`note`)."""
        return cls(note=why, stopped="not run")

    def to_result(self, result) -> None:
        """Give a pair's Result (`e2e.framework.result.Result`) the reduction's findings as
        its fields: the bundle (`repro_path` once it re-verified), its guilty op and failing
        step, where the types broke and what broke them."""
        if self.bundle is not None:
            result.bundle = str(self.bundle)
            if self.verified:
                result.repro_path = str(self.bundle)
        result.guilty_op, result.failing_step = self.guilty_op, self.failing_step
        result.types_broke, result.types_bundle = self.types_broke, self.types_bundle
        result.types_root = self.types_root

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
