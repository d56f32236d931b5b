"""The reducer's strategies as a table, walked for each failing pair.

The first strategy that applies reduces the pair; one that `follows` is tried as well when
that found no bundle (its note joins the first one's). Each search contributes its own
strategies (`e2e.reducer.pair.Strategy`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from compiler.replay_runtime.type_check import CALCULATIONS
from compiler.toolchain import TORCH_INPUT
from compiler.type_check import TypesBroke, where_types_broke
from e2e.reducer.bundle import add_to_readme
from e2e.reducer.case import ERROR, Case, compile_signature, single_threaded
from e2e.reducer.declared import DeclaredTooEarly
from e2e.reducer.failure import ExecuteCrash, FxMismatch, Hang, PassError, StageCrash, reduce_localized
from e2e.reducer.frontend_graph import FrontendFailure
from e2e.reducer.jit_graph import JitGraphMismatch
from e2e.reducer.localize import Localized
from e2e.reducer.onnx_graph import OnnxMismatch, OwnOnnxModel
from e2e.reducer.outcome import SHARED, ReduceOutcome
from e2e.reducer.pair import DEFAULT_TIME_BOX, FailingPair, Strategy

STRATEGIES: tuple[Strategy, ...] = (
    Hang(),  # outcome timeout, in whichever stage
    OnnxMismatch(),  # wrong results of an onnx config
    DeclaredTooEarly(),  # a shape or dtype mismatch its backend input already declares
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
# How long the type check of a failing pair's torch-backend stage may take (beyond the time box),
# and the reduction of the bundle that starts where its types still agreed.
TYPE_CHECK_SECONDS = 20.0
TYPES_BUNDLE_SECONDS = 20.0


def candidates(pair: FailingPair) -> list[Strategy]:
    """The strategies a pair is given to, in order: the first that applies, then those that follow."""
    taken: list[Strategy] = []
    for strategy in STRATEGIES:
        # One that `gives_way` is tried first and does not count as the first that applies.
        leading = [s for s in taken if not getattr(s, "gives_way", False)]
        if (not leading or strategy.follows) and strategy.applies(pair):
            taken.append(strategy)
    return taken


def reduce_result(
    result, prepared, config, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX, *, check_types: bool = True
) -> ReduceOutcome:
    """A failing pair's Result -> its bundle (or why there is none), and where its types
    broke when a step before the failing pass broke them, with a second bundle that starts
    where they still agreed (unless not `check_types`: 2 s for a torch-backend crash, whose
    replay crashes again when no earlier step broke the types)."""
    pair = FailingPair(result, prepared, config, Path(reports_dir))
    outcome = _reduce(pair, time_box)
    # A failure that shares an earlier one's bundle is that bug again: its type check was done
    # for the bundle (its README says where the types broke), and is not replayed for each pair.
    checked = types_broke(pair) if outcome.stopped != SHARED and check_types else TypeCheck()
    outcome.types_broke, outcome.type_check_failed, outcome.types_bundle = checked.broke, checked.failed, checked.bundle
    outcome.types_root = checked.root
    if outcome.types_broke is not None and outcome.bundle is not None:
        add_to_readme(outcome.bundle, outcome.types_broke, checked.bundle_dir)
    return outcome


def _reduce(pair: FailingPair, time_box: float) -> ReduceOutcome:
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


# The stages whose failure may come from types an earlier step broke in the torch dialect.
_AFTER_TORCH_BACKEND = ("torch-backend", "backend", "lower", "execute", "compare")
# Where a pair's bundle directory keeps the bundle that starts where its types still agreed.
TYPES_BUNDLE = "types"


@dataclass(frozen=True)
class TypeCheck:
    """What the type check of a failing pair's torch-backend stage found."""

    broke: str | None = None  # the step after which the types first disagree, in words
    root: str | None = None  # what broke them, whatever the step (`Disagreement.root`)
    failed: str | None = None  # why the check gave no answer (a pass crashed or hung on the replay)
    bundle: str | None = None  # the bundle from the step's input, in words (a note), if one was tried
    bundle_dir: Path | None = None  # that bundle, when it re-verified


def types_broke(pair: FailingPair, seconds: float = TYPE_CHECK_SECONDS) -> TypeCheck:
    """The pair's torch-backend stage replayed pass by pass with its types checked after
    each (`compiler.type_check`), in a forked child: the step after which they first
    disagree (none when they never do or the pair has no torch-backend stage), and a bundle
    that starts from that step's input, reduced while the step still breaks them. A pass
    that crashes or hangs on the replay costs a note, never the reduction it follows."""
    from e2e.framework import isolation

    if pair.result.stage not in _AFTER_TORCH_BACKEND or (text := pair.saved_input("torch-backend")) is None:
        return TypeCheck()
    chain = pair.config.toolchain()
    if chain.backend == TORCH_INPUT:
        return TypeCheck()

    found = isolation.run_forked(lambda: where_types_broke(text, chain.to_torch_backend, seconds), timeout=seconds + 30)
    if found is None:
        return TypeCheck()
    if not isinstance(found, TypesBroke):
        return TypeCheck(failed=f"the type check gave no answer: {_ending(found)}")
    # Its own child: a pass that crashes on a reduced candidate costs the bundle, not the finding.
    bundled = isolation.run_forked(lambda: _types_bundle(pair, found), timeout=TYPES_BUNDLE_SECONDS + 90)
    if isinstance(bundled, TypeCheck):
        return bundled
    why = f"no bundle from the step's input: its reduction ended: {_ending(bundled)}"
    return TypeCheck(found.describe(), found.disagreement.root(), bundle=why)


def _ending(outcome) -> str:
    """How a forked child ended that gave no answer (`e2e.framework.isolation`'s endings)."""
    return f"{type(outcome).__name__} {getattr(outcome, 'reason', '')}".strip()[:300]


def _types_bundle(pair: FailingPair, broke: TypesBroke) -> TypeCheck:
    """`broke` with a bundle of its own: the step's input, reduced while the step (and the
    type check after it) fails the same way, as any failing pass is reduced."""
    pipeline, root = broke.replay_pipeline(), broke.disagreement.root()
    signature, diagnostics = compile_signature(broke.input_ir, "torch-backend", pipeline, pipeline[-1])
    if signature is None:
        return TypeCheck(
            broke.describe(), root, bundle="no bundle from the step's input: the step alone keeps the types"
        )
    localized = Localized(Case(ERROR, "torch-backend", pipeline, signature), broke.input_ir, diagnostics)
    outcome = reduce_localized(
        localized,
        original_ir=broke.input_ir,
        within=TYPES_BUNDLE,
        # torch-mlir's shape and dtype calculations kept whole: without the op it wraps, a
        # calculation's shape function would claim shapes nothing computes.
        whole=CALCULATIONS,
        **pair.where(TYPES_BUNDLE_SECONDS),
    )
    if outcome.bundle is None:
        return TypeCheck(broke.describe(), root, bundle=f"no bundle from the step's input: {outcome.note}")
    verified = "verified" if outcome.verified else f"did not re-verify: {outcome.note}"
    words = f"from the step's input, bundle={outcome.bundle} ({verified}, {outcome.ops_after} ops)"
    return TypeCheck(broke.describe(), root, bundle=words, bundle_dir=outcome.bundle if outcome.verified else None)


def reduce_isolated(
    result,
    prepared,
    config,
    reports_dir: Path,
    time_box: float = DEFAULT_TIME_BOX,
    memory_bytes: int | None = None,
    *,
    check_types: bool = True,
) -> ReduceOutcome | str:
    """`reduce_result` in a forked, single-threaded child; why not, as a note, when it ends badly.

    The child's limit leaves room for the bundle's re-verification after the time box.
    """
    from e2e.framework import isolation

    def child() -> ReduceOutcome:
        single_threaded()
        return reduce_result(result, prepared, config, reports_dir, time_box, check_types=check_types)

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
