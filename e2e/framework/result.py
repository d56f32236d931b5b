"""The result of one (test, config) pair."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# How a pair ended before xfail sets are applied (the plugin adds xfail / xpass).
PASS, FAIL, CRASH, TIMEOUT, ERROR = "pass", "fail", "crash", "timeout", "error"
# The pair outgrew its memory cap (`--memory-cap`) and was killed.
MEMORY = "memory"
# The config cannot honour what the test asks (e.g. dynamic dims on a static-only frontend):
# neither a pass nor a compiler failure; pytest reports it as skipped with the reason.
SKIP = "skip"

# Shape modes: `annotated` exports `-1` dims of `annotate_args` as dynamic; `static`
# exports the example inputs' shapes, as upstream torch-mlir's FX configs do.
SHAPE_MODES = ("annotated", "static")


class NotApplicable(Exception):
    """Raised by a config's compile when it cannot honour the test; ends as outcome `skip`."""


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
    failing_call: int | None = None  # the golden trace item a compare failure mismatched on
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. "torch.jit.trace fallback: ..."
    repro_path: str | None = None  # reproducer bundle, when one was written
    shape_mode: str = "annotated"  # one of SHAPE_MODES
    peak_rss_mib: float = 0.0  # the largest resident set of the pair's child
    cached: bool = False  # taken from the result cache of an earlier run
    stage_seconds: dict[str, float] = field(default_factory=dict)  # where the pair's time went

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def to_json(self) -> dict:
        return asdict(self)
