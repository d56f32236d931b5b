"""The result of one (test, config) pair."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# How a pair ended before xfail sets are applied (the plugin adds xfail / xpass).
PASS, FAIL, CRASH, TIMEOUT, ERROR = "pass", "fail", "crash", "timeout", "error"


@dataclass
class Result:
    test: str
    config: str
    outcome: str
    stage: str | None = None  # the stage that failed (see compiler.stages.STAGES)
    signature: str | None = None  # stage + pass/op + normalized first error, or mismatch kind
    error: str = ""  # what a person reads
    ir_path: str | None = None  # saved IR of the failing stage, under reports/
    failing_pass: str | None = None
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. "torch.jit.trace fallback: ..."
    repro_path: str | None = None  # reproducer bundle, when one was written

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def to_json(self) -> dict:
        return asdict(self)
