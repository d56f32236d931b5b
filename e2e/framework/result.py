"""The result of one (test, config) pair."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Protocol, runtime_checkable

from e2e.framework.signature import Signature

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

# The stages in which a pair's compiled program runs.
RUNTIME_STAGES = ("execute", "compare")


# Which side a runtime config's failure is on, judged beside its RefBackend twin
# (`e2e.configs.runtime`): the runtime's, the RefBackend's, or the IR both ran.
RUNTIME_SIDE, REFBACKEND_SIDE, BOTH_WRONG = "runtime-side", "RefBackend-side", "both wrong"
VERDICT_KINDS = (RUNTIME_SIDE, REFBACKEND_SIDE, BOTH_WRONG)


@runtime_checkable
class Twinned(Protocol):
    """A config judged beside a RefBackend twin (the runtime configs)."""

    twin: str


class NotApplicable(Exception):
    """Raised by a config's compile when it cannot honour the test; ends as outcome `skip`."""


@dataclass
class Result:
    test: str
    config: str
    outcome: str
    stage: str | None = None  # the stage that failed (see compiler.stages.STAGES)
    signature: Signature | None = None  # stage + pass/op + normalized first error, or mismatch kind
    error: str = ""  # what a person reads
    ir_path: str | None = None  # saved IR of the failing stage, under reports/
    failing_pass: str | None = None
    failing_call: int | None = None  # the golden trace item a compare failure mismatched on
    twin: str | None = None  # a runtime config's RefBackend twin
    verdict: str | None = None  # one of VERDICT_KINDS when runtime and twin disagree
    verdict_reason: str | None = None  # the verdict in words
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. "torch.jit.trace fallback: ..."
    repro_path: str | None = None  # reproducer bundle, when one was written
    shape_mode: str = "annotated"  # one of SHAPE_MODES
    peak_rss_mib: float = 0.0  # the largest resident set of the pair's child
    cached: bool = False  # taken from the result cache of an earlier run
    stage_seconds: dict[str, float] = field(default_factory=dict)  # where the pair's time went
    stages_from_cache: list[str] = field(default_factory=list)  # pipeline stages the program cache answered
    # The stage a first attempt timed out in, when a rerun in a fresh host (not a timeout)
    # gave this Result instead (`e2e.pair`: a hang is confirmed before it is called one).
    hung_first: str | None = None
    # The check of an explainer that ruled on the pair (a generated program's oracle:
    # `e2e.generate.oracle.ORACLE_CHECKS`), and whether it turned the runner's verdict away
    # (acquitted the pair, or moved its failure to another stage).
    check: str | None = None
    check_turned_away: bool = False
    # What the reducer found (`e2e.reducer.outcome.ReduceOutcome`): the bundle it wrote
    # (`repro_path` only once it re-verified), its guilty op and its failing step (its case's
    # last pipeline entry), and, when the failing pass only tripped over types an earlier
    # step broke: that step in words, the bundle from its input in words, and what broke them.
    bundle: str | None = None
    guilty_op: str | None = None
    failing_step: str | None = None
    types_broke: str | None = None
    types_bundle: str | None = None
    types_root: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    @property
    def ran_and_failed(self) -> bool:
        """Whether the pair's compiled program ran and then failed or gave a wrong answer."""
        return not self.passed and self.stage in RUNTIME_STAGES

    def to_json(self) -> dict:
        """The row results files hold: the signature as its text (`Signature.format`)."""
        return {**asdict(self), "signature": self.signature.format() if self.signature is not None else None}

    @classmethod
    def from_json(cls, row: dict) -> "Result":
        """The Result a row of `to_json` records (read back from a file: the signature parsed).
        A results file's own columns (`final`, `nodeid`, ...) are not the Result's and are left
        out; a row written before a field existed takes its default."""
        text = row.get("signature")
        known = {key: value for key, value in row.items() if key in _FIELDS}
        return cls(**{**known, "signature": Signature.parse(text) if text else None})


_FIELDS = frozenset(f.name for f in fields(Result))
