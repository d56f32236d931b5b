"""The MLIR-level searches and their strategies: localize, reduce, bundle.

reduce_mlir(text, pipeline, stage, error_pattern=...)     # a .mlir file and a pipeline
reduce_mismatch(module, inputs, to_executor, ...)           # wrong results: the smallest miscompiled FX group
Hang, FxMismatch, ExecuteCrash, StageCrash, PassError    # strategies of a failing pair (strategies.py)

(A failing (test, config) pair: `e2e.reducer.strategies.reduce_result`; the onnx config's
wrong results: `e2e.reducer.onnx_graph`; the TorchScript graph's: `e2e.reducer.jit_graph`.)
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from compiler.replay_runtime.mlir import new_context, parse_module
from compiler.replay_runtime.passes import RECORD
from e2e.framework.signature import Signature, guilty_op
from e2e.reducer.bundle import BundleInfo, child_seconds
from e2e.reducer.case import CRASH, ERROR, Case, compile_signature, observe
from e2e.reducer.finish import (
    claim_bundle,
    crashed_queries_note,
    nothing_localized,
    write_outcome,
)
from e2e.reducer.graph import TIME_BOX, GraphSearch, localize_group
from e2e.reducer.guilty import asserting_op, lowered_from, op_in_frames, vanished_op
from e2e.reducer.localize import (
    Localized,
    localize_crash,
    localize_error,
    parses,
    stage_pipeline,
    stage_pipelines,
)
from e2e.reducer.outcome import NO_LOCALIZATION, ReduceOutcome
from e2e.reducer.pair import DEFAULT_TIME_BOX, BundleTarget, FailingPair, LocalizedMismatch
from e2e.reducer.reduce import STRUCTURAL_OPS, behavioural_ops, give_input_sizes, op_count, reduce_ops

# At most this long to find the pass a hanging stage hangs in (the passes before it run first).
HANG_LOCALIZE_SECONDS = 30.0


def _name_guilty_op(case: Case, text: str) -> str | None:
    """The op the reduced program's failure is about: the one its diagnostic names, the one
    a crash's native frames name, the one whose lowering wrote the assert that failed; else
    the program's behavioural ops."""
    if case.kind == ERROR:
        _, diagnostics = compile_signature(text, case.stage, case.pipeline, case.pipeline[-1])
        named = guilty_op(diagnostics)
        if named in STRUCTURAL_OPS:  # `func.return`'s types: the op the pass folded away is the bug's
            named = vanished_op(text, case.pipeline[-1]) or named
        elif named and f"{named} " not in text and f'"{named}"' not in text:  # an op the pass created
            named = lowered_from(text, case.stage, case.pipeline) or named
        if named:
            return named
    if case.kind == CRASH and case.signature.message:
        named = op_in_frames(case.signature.message, text) or asserting_op(case.signature.message, text, case.pipeline)
        if named:
            return named
    left = behavioural_ops(text)
    return left[0] if len(left) == 1 else (", ".join(left) if left else case.guilty_op)


def reduce_localized(
    localized: Localized,
    *,
    test: str,
    config: str,
    reports_dir: Path,
    original_ir: str,
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
    within: str = "",
    whole: Collection[str] = (),
    name_guilty: Callable[[str], str | None] | None = None,
) -> ReduceOutcome:
    """Reduce a localized compile failure or crash and write (or join) its bundle (`within`
    a subdirectory of the pair's bundle directory, see `claim_bundle`); ops named in `whole`
    are removed or kept whole (`reduce_ops`); `name_guilty(reduced)` names the guilty op
    where the search knows better than the diagnostics."""
    start = time.monotonic()
    case = localized.case
    target, shared = claim_bundle(reports_dir, test, config, case, within, ir=localized.ir)
    if shared is not None:
        return shared

    # A candidate may make a pass loop forever: allow a few times what the original takes
    # (a hang case: its own hang_seconds, which observe applies).
    began = time.monotonic()
    if observe(case, localized.ir) != case.signature:
        return ReduceOutcome(note=f"the localized failure does not recur: {case.signature}", stopped=NO_LOCALIZATION)
    query_timeout = max(3.0, 5 * (time.monotonic() - began))

    accepted_by_torch = shape_functions_accept(localized.ir)

    def keeps(candidate: str) -> bool:
        if not accepted_by_torch(candidate):
            return False  # a program torch itself would refuse: another program than the bug's
        return observe(case, candidate, timeout=query_timeout) == case.signature

    reduction = reduce_ops(localized.ir, keeps, deadline=start + time_box, whole=whole)
    case.guilty_op = (name_guilty and name_guilty(reduction.text)) or _name_guilty_op(case, reduction.text)
    info = BundleInfo(
        test,
        config,
        case,
        reduction.text,
        original_ir,
        op_count(original_ir) if parses(original_ir) else reduction.ops_before,
        reduction.ops_after,
        reduction.queries,
        reduction.seconds,
        reduction.minimal,
    )
    return write_outcome(
        info,
        target,
        start=start,
        stopped="1-minimal" if reduction.minimal else TIME_BOX,
        verify=verify,
        time_box=time_box,
    )


def shape_functions_accept(text: str) -> Callable[[str], bool]:
    """For torch-dialect IR whose ops' declared types agree with what torch computes from
    their operands (`compiler.replay_runtime.type_check`): whether a candidate's still do.
    A reduction that bypasses an op with an operand of the same type can hand the next op a
    value of another size than it declares; torch's shape functions refuse that program,
    and a failure on it is not the bug's. Any candidate, for other IR or IR that disagrees."""
    from compiler.replay_runtime.type_check import first_disagreement

    def agrees(candidate: str) -> bool:
        try:
            return first_disagreement(parse_module(candidate, new_context())) is None
        except Exception:  # noqa: BLE001 - a check that cannot run refuses nothing
            return True

    if "torch.aten." not in text or not agrees(text):
        return lambda candidate: True
    return agrees


def reduce_mlir(
    text: str,
    pipeline: Sequence[str],
    stage: str = "lower",
    *,
    crash: bool = False,
    error_pattern: str | None = None,
    test: str = "mlir",
    config: str = "pipeline",
    reports_dir: Path = Path("reports"),
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
) -> ReduceOutcome:
    """Reduce a module that fails (or crashes in) `pipeline`; bundle under reports_dir/repro."""
    localized = localize_crash(text, pipeline, stage) if crash else localize_error(text, pipeline, stage)
    if localized is None:
        return ReduceOutcome(
            note="the pipeline does not " + ("crash" if crash else "fail") + " on this module", stopped=NO_LOCALIZATION
        )
    if error_pattern and not re.search(error_pattern, "\n".join(localized.diagnostics)):
        return ReduceOutcome(
            note=f"the failure does not match {error_pattern!r}: {localized.case.signature}", stopped=NO_LOCALIZATION
        )
    return reduce_localized(
        localized, test=test, config=config, reports_dir=reports_dir, original_ir=text, time_box=time_box, verify=verify
    )


def reduce_mismatch(
    module: Any,
    inputs: Sequence[Any],
    to_executor: Sequence[str],
    *,
    test: str,
    config: str,
    reports_dir: Path,
    arg_shapes: Sequence[Sequence[int] | None] | None = None,
    tolerance=None,
    method: str = "forward",
    original_ir: str = "",
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
) -> ReduceOutcome:
    """Wrong results: the smallest group of FX nodes whose compiled result differs, as a module.

    `to_executor` (pass entries) compiles torch backend IR to LLVM; `arg_shapes` are the shapes (-1:
    dynamic) the config compiled for, so a dynamic-shape miscompile stays visible.
    """
    start = time.monotonic()
    try:
        search = GraphSearch(module, inputs, to_executor, arg_shapes=arg_shapes, tolerance=tolerance, method=method)
    except Exception as error:
        return ReduceOutcome(
            note=f"the module does not export again: {type(error).__name__}: {error}"[:300], stopped=NO_LOCALIZATION
        )
    found = localize_group(search, start + time_box)
    if isinstance(found, str):
        return nothing_localized(found, search, start)
    notes = [
        f"localized to {len(found.nodes)} FX node(s) of {len(search.units)}, given golden inputs: "
        + "; ".join(f"`{n}`" for n in found.nodes),
        f"compiled vs native: {found.detail}",
    ]
    if search.crashed_queries:
        notes.append(crashed_queries_note(search.crashed_queries))
    if found.literals:
        notes.append(
            "sizes computed in the graph replaced by literals: "
            + ", ".join(f"{k} -> {v}" for k, v in found.literals.items())
        )
    return LocalizedMismatch(found, found.guilty_op, to_executor, notes, found.stopped, original_ir).bundle(
        BundleTarget(test, config, reports_dir, tolerance, start, time_box, verify)
    )


def _same_failure(replay: Signature, report: Signature) -> bool:
    """The pass's own error, with or without the context a frontend prefixed to it.

    (The JIT configs report `ops unknown to the torch dialect ...: aten.vstack; <the pass's
    error>`; signatures are cut at 300 characters, so the longer one is compared as far as
    the shorter goes.)
    """
    if replay == report:
        return True
    if (replay.stage, replay.where) != (report.stage, report.where):
        return False
    message, rest = replay.message or "", report.message or ""
    if rest.startswith("ops unknown to the torch dialect") and "; " in rest:
        rest = rest.split("; ", 1)[1]
    shorter = min(len(rest), len(message))
    return shorter > 0 and rest[:shorter] == message[:shorter]


# --- the MLIR-level strategies (the table is in strategies.py) -------------------------


class Hang:
    """A compile stage that hangs: the pass it hangs in, found pass by pass in a child, and
    the smallest input on which that pass still gives no result in `HANG_SECONDS`."""

    name, follows = "hang", False

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.outcome == "timeout"

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        budget = HANG_LOCALIZE_SECONDS
        return _replay_stage_pass_by_pass(
            pair, time_box, "a timeout", f"the stage finished when replayed pass by pass in {budget:.0f} s: slow, not hung",
            timeout=budget, hang=True,
        )  # fmt: skip


class FxMismatch:
    """Wrong results: the smallest miscompiled group of the module's FX nodes (`reduce_mismatch`),
    for the call that mismatched (a dynamic test is called at several shapes)."""

    name, follows = "in the FX graph", False

    def applies(self, pair: FailingPair) -> bool:
        # onnx: its own search; a program given as StableHLO: no FX graph to search
        return pair.result.stage == "compare" and pair.frontend.reducer.fx_graph_search

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        prepared = pair.prepared
        method, call = prepared.failing_call(pair.result.failing_call)
        shapes = prepared.arg_shapes(method)
        # LTC traces and eager ops are compiled for the example inputs' shapes alone.
        tries = [shapes, None] if pair.frontend.reducer.dynamic_graph_search and shapes is not None else [None]
        start = time.monotonic()
        for arg_shapes in tries:  # the test's dynamic dims first; then the example shapes
            outcome = reduce_mismatch(
                prepared.module,
                call,
                stage_pipelines(pair.config)["backend"],
                arg_shapes=arg_shapes,
                tolerance=prepared.test.tolerance,
                method=method,
                original_ir=pair.saved_input("backend") or "",
                **pair.where(max(time_box - (time.monotonic() - start), 5.0)),
            )
            if outcome.bundle is not None:
                break
        return outcome


class ExecuteCrash:
    """The program that crashes when compiled and run, reduced with the crash as its
    signature. Every candidate is replayed by the config's own executor (`Executor.execute_entries`:
    the RefBackend's JIT, or a runtime's `_run` replay entry), each in a forked child.

    On the RefBackend the torch-level program (the backend stage's input, compiled through
    that stage and lowered) is reduced first: a crash is most often a check the lowering
    emitted that fails (`cf.assert`, "mismatched size for broadcast"), and a reduction of the
    lowered IR keeps that check alone, which shows nothing of the ops that made it. The
    lowered IR (the `lower` stage's input) is reduced when the torch level does not crash."""

    name, follows = "execute crash", False

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.outcome == "crash" and pair.result.stage == "execute"

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        start, notes = time.monotonic(), []
        shapes = None  # the real inputs' sizes, for the RefBackend's made-up inputs
        if pair.prepared is not None:
            _, call = pair.prepared.failing_call(pair.result.failing_call)
            shapes = [list(value.shape) for value in call] if all(hasattr(v, "shape") for v in call) else None
        for stage, pipeline in self._replays(pair):
            text = pair.saved_input(stage)
            if text is None:
                notes.append(f"no saved input of stage {stage}")
                continue
            if shapes is not None and RECORD in pipeline:
                text = give_input_sizes(text, shapes) or text
            observed = observe(Case(CRASH, "execute", pipeline, Signature(CRASH, "execute")), text)
            if observed is None or observed.stage != CRASH:
                notes.append(f"the {stage} stage's input did not crash when compiled and run: {observed}")
                continue
            case = Case(CRASH, "execute", pipeline, observed)
            left = max(time_box - (time.monotonic() - start), 5.0)
            return reduce_localized(Localized(case, text, []), original_ir=text, **pair.where(left))
        return ReduceOutcome(note="; ".join(notes), stopped=NO_LOCALIZATION)

    @staticmethod
    def _replays(pair: FailingPair) -> list[tuple[str, list[str]]]:
        """(stage whose input is replayed, the pipeline that compiles and runs it), in turn."""
        stages = stage_pipelines(pair.config)
        execute, lower, backend = stages["execute"], stages.get("lower", []), stages.get("backend", [])
        replays = [("lower", execute)]
        own = len(backend) - len(lower)  # the backend stage's own passes, before the lowering's
        if RECORD in execute and own > 0 and backend[own:] == lower:
            replays.insert(0, ("backend", backend[:own] + execute))
        return replays


class StageCrash:
    """A compile stage that crashes: the pass it crashes in, replayed pass by pass in children."""

    name, follows = "stage crash", False

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.outcome == "crash"

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        return _replay_stage_pass_by_pass(
            pair,
            time_box,
            "a crash",
            "the crash did not recur when the stage was replayed pass by pass",
            timeout=child_seconds(time_box),
        )


def _replay_stage_pass_by_pass(pair: FailingPair, time_box: float, what: str, not_again: str, **how) -> ReduceOutcome:
    """A compile stage that crashed or hung, replayed pass by pass in children from its saved
    input (`how`: localize_crash's budget, hang): the pass it ends in, and its smallest input."""
    stage, stage_input = pair.result.stage, pair.saved_input(pair.result.stage)
    if stage_input is None or stage not in ("torch-backend", "backend", "lower"):
        return ReduceOutcome(
            note=f"{what} in stage {stage} is not reduced (no pass pipeline to replay)", stopped=NO_LOCALIZATION
        )
    localized = localize_crash(stage_input, stage_pipeline(pair.config, stage, stage_input), stage, **how)
    if localized is None:
        return ReduceOutcome(note=not_again, stopped=NO_LOCALIZATION)
    return reduce_localized(localized, original_ir=stage_input, **pair.where(time_box))


class PassError:
    """A pass that fails: its input IR (or the stage replayed up to it), reduced while the
    pass fails with the same signature."""

    name, follows = "pass error", False

    def applies(self, pair: FailingPair) -> bool:
        return True  # the table's last entry: every other failure

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        result = pair.result
        if not result.failing_pass:
            return ReduceOutcome(
                note=f"no MLIR pass failed (stage {result.stage}); nothing to reduce at the IR level",
                stopped=NO_LOCALIZATION,
            )
        stage_input = pair.saved_input(result.stage)
        localized = None
        if result.ir_path and parses(Path(result.ir_path).read_text()):
            text = Path(result.ir_path).read_text()
            case = Case(ERROR, result.stage, [result.failing_pass], result.signature)
            observed, diagnostics = compile_signature(text, case.stage, case.pipeline, result.failing_pass)
            if observed == result.signature:
                case.guilty_op = guilty_op(diagnostics)
                localized = Localized(case, text, diagnostics)
        if localized is None and stage_input is not None:
            # The failing pass's input does not parse alone (e.g. torch_c ops): replay the stage.
            localized = localize_error(
                stage_input, stage_pipeline(pair.config, result.stage, stage_input), result.stage
            )
        if localized is None:
            return ReduceOutcome(note="the failure did not recur when its stage was replayed", stopped=NO_LOCALIZATION)
        if not _same_failure(localized.case.signature, result.signature):
            return ReduceOutcome(
                note=f"replaying shows another signature: {localized.case.signature}", stopped=NO_LOCALIZATION
            )
        return reduce_localized(localized, original_ir=stage_input or localized.ir, **pair.where(time_box))
