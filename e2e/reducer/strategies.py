"""The reducer's strategies as a table, walked for each failing pair.

The first strategy that applies reduces the pair; one that `follows` is tried as well when
that found no bundle (its note joins the first one's). Each search contributes its own
strategies (`e2e.reducer.pair.Strategy`).
"""

from __future__ import annotations

import time
from pathlib import Path

from e2e.reducer.case import single_threaded
from e2e.reducer.failure import ExecuteCrash, FxMismatch, Hang, PassError, StageCrash
from e2e.reducer.frontend_graph import FrontendFailure
from e2e.reducer.jit_graph import JitGraphMismatch
from e2e.reducer.onnx_graph import OnnxMismatch, OwnOnnxModel
from e2e.reducer.outcome import ReduceOutcome
from e2e.reducer.pair import DEFAULT_TIME_BOX, FailingPair, Strategy

STRATEGIES: tuple[Strategy, ...] = (
    Hang(),  # outcome timeout, in whichever stage
    OnnxMismatch(),  # wrong results of an onnx config
    FxMismatch(),  # wrong results of the other configs
    JitGraphMismatch(),  # ... and of torchscript, in its graph, when the FX graph search found nothing
    OwnOnnxModel(),  # capture and import failures of a test that is an ONNX model
    FrontendFailure(),  # capture and import failures
    ExecuteCrash(),  # a crash while the compiled program ran
    StageCrash(),  # a crash in a compile stage
    PassError(),  # a failing pass: every other failure
)

# A following strategy gets what is left of the time box, and at least this long.
FOLLOWING_SECONDS = 10.0


def candidates(pair: FailingPair) -> list[Strategy]:
    """The strategies a pair is given to, in order: the first that applies, then those that follow."""
    taken: list[Strategy] = []
    for strategy in STRATEGIES:
        if (not taken or strategy.follows) and strategy.applies(pair):
            taken.append(strategy)
    return taken


def reduce_result(result, prepared, config, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX) -> ReduceOutcome:
    """A failing pair's Result -> its bundle (or why there is none)."""
    pair = FailingPair(result, prepared, config, Path(reports_dir))
    first, *following = candidates(pair)  # PassError applies to every pair
    start, outcome = time.monotonic(), first.reduce(pair, time_box)
    for strategy in following:
        if outcome.bundle is not None:
            break
        later = strategy.reduce(pair, max(time_box - (time.monotonic() - start), FOLLOWING_SECONDS))
        if later.bundle is not None:
            return later
        outcome.note = f"{outcome.note}; {strategy.name}: {later.note}"
    return outcome


def reduce_isolated(
    result, prepared, config, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX, memory_bytes: int | None = None
) -> ReduceOutcome | str:
    """`reduce_result` in a forked, single-threaded child; why not, as a note, when it ends badly.

    The child's limit leaves room for the bundle's re-verification after the time box.
    """
    from e2e.framework import isolation

    def child() -> ReduceOutcome:
        single_threaded()
        return reduce_result(result, prepared, config, reports_dir, time_box)

    limit = time_box + 150
    outcome = isolation.run_forked(child, timeout=limit, memory_bytes=memory_bytes)
    if isinstance(outcome, ReduceOutcome):
        return outcome
    if isinstance(outcome, isolation.OverMemory):
        return f"reducer: no bundle: stopped=memory the reducer grew past the cap of {outcome.limit >> 20} MiB (killed)"
    if isinstance(outcome, isolation.TimedOut):
        return f"reducer: no bundle: stopped=time-box the reducer gave no answer in {limit:.0f} s (killed)"
    if isinstance(outcome, isolation.Crashed):
        tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
        return f"reducer: no bundle: stopped=crash the reducer's process was {outcome.reason}: {tail[0][:300]}"
    return f"reducer: no bundle: stopped=crash the reducer raised: {str(outcome.traceback).strip()[-500:]}"
