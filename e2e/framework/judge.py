"""How a pair is judged: once, by the runner, then explained by the config's explainers.

A config compiles and runs; it does not compare. The runner compares the trace with the
golden one (`compare_traces`), or takes the stage that raised, and hands what it found
(`Outcome`) to each of the config's explainers in turn (`Explained.explainers()`). An
explainer says why, as typed fields (`Explanation`):

- the capture check (FX-captured configs): the mismatch is torch.export's, not the
  compiler's, and the failure moves to stage `capture`;
- the ONNX oracle (`onnx` configs): what onnxruntime computes on the same model;
- a runtime config's RefBackend twin: which side of the runtime / RefBackend pair the bug
  is on (`verdict`, `twin`), and the runtime's native reproducer.

A test may carry explainers of its own (`Test.explainers`), asked after its config's: the
oracle of generated programs (`e2e.generate.oracle`), which may acquit a pair
(`Explanation.acquit`: torch's rounding, not the compiler's) or re-attribute it, and names
the check that ruled (`Explanation.check`; the Result's `check` and `check_turned_away`).

A re-attribution (`Explanation.stage`) or an acquittal ends the asking: what follows would explain a
failure that is no longer the compiler's. An explainer that raises costs its note, never the
pair's result.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from compiler.replay_runtime.compare import Mismatch
from e2e.framework.trace import Trace


@dataclass
class Outcome:
    """What the runner found, before any explainer: the stage that failed (None: every call
    matched torch), the error it raised or the mismatch the comparison found, and what the
    config produced on the way (its artifact, the trace)."""

    stage: str | None
    error: BaseException | None = None
    mismatch: Mismatch | None = None
    artifact: Any = None  # None when compile raised
    trace: Trace | None = None  # None unless the program ran to the end
    ir_dir: Path | None = None  # where the pair's IR is saved

    @property
    def passed(self) -> bool:
        return self.stage is None


@dataclass
class Explanation:
    """Why a pair ended as it did, in fields the Result takes over as they are."""

    notes: list[str] = field(default_factory=list)  # what a person reads
    verdict: str | None = None  # one of result.VERDICT_KINDS
    verdict_reason: str | None = None  # the verdict in words
    stage: str | None = None  # the stage the failure belongs to, when not the one it showed in
    error: str | None = None  # the failure's text in that stage
    # Not a failure after all: the pair passes (e.g. a generated program's float result closer
    # to the float64 answer than torch's own, `e2e.generate.oracle`); the notes say why.
    acquit: bool = False
    # The check that ruled (one of a generated program's oracle checks,
    # `e2e.generate.oracle.ORACLE_CHECKS`): the Result's `check`.
    check: str | None = None

    @property
    def turned_away(self) -> bool:
        """Whether this explanation turned the runner's verdict away: acquitted the pair or
        moved its failure to another stage (the Result's `check_turned_away`)."""
        return self.acquit or self.stage is not None


@runtime_checkable
class Annotated(Protocol):
    """An artifact whose compile left notes for the pair's Result (fallbacks, static shapes)."""

    notes: list[str]


@runtime_checkable
class Closable(Protocol):
    """An artifact that holds what must be freed (ExecutionEngines, runtime sessions)."""

    def close(self) -> None: ...


@runtime_checkable
class Explainer(Protocol):
    def explain(self, prepared: Any, outcome: Outcome) -> Explanation | None: ...


@runtime_checkable
class Explained(Protocol):
    """A config whose pairs are explained after the runner judged them (in this order)."""

    def explainers(self) -> Sequence[Explainer]: ...


def explain(config: Any, prepared: Any, outcome: Outcome) -> list[Explanation]:
    """The config's explanations of `outcome`, then the test's own (`Test.explainers`: a
    generated program's oracle), up to and including a re-attribution or an acquittal."""
    explainers = [
        *(config.explainers() if isinstance(config, Explained) else ()),
        *getattr(getattr(prepared, "test", None), "explainers", ()),
    ]
    found: list[Explanation] = []
    for explainer in explainers:
        try:
            explanation = explainer.explain(prepared, outcome)
        except Exception as error:
            frame = traceback.extract_tb(error.__traceback__)[-1]
            where = f"{frame.filename}:{frame.lineno}"
            found.append(
                Explanation([f"{type(explainer).__name__} raised {type(error).__name__}: {error} (at {where})"])
            )
            continue
        if explanation is not None:
            found.append(explanation)
            if explanation.stage is not None or explanation.acquit:
                break
    return found
