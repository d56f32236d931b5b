"""From a failure to a verified bundle: localize, reduce, bundle (the reducer's entry points).

reduce_result(result, prepared, config, reports_dir)     # a failing (test, config) pair
reduce_mlir(text, pipeline, stage, error_pattern=...)     # a .mlir file and a pipeline
reduce_mismatch(module, inputs, toolchain, ...)           # wrong results: the smallest miscompiled FX group
(onnx config: e2e.reducer.onnx_graph.reduce_onnx_mismatch, the smallest miscompiled group of ONNX nodes)
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Sequence

from e2e.framework.signature import Signature, guilty_op
from e2e.reducer.bundle import BundleInfo
from e2e.reducer.case import CRASH, ERROR, Case, compile_signature, observe, single_threaded
from e2e.reducer.finish import (
    bundle_dir_for,
    claim_bundle,
    crashed_queries_note,
    mismatch_bundle,
    nothing_localized,
    write_outcome,
)
from e2e.reducer.graph import ONE_MINIMAL, TIME_BOX, GraphSearch, localize_group
from e2e.reducer.localize import (
    Localized,
    localize_crash,
    localize_error,
    parses,
    stage_pipeline,
    toolchain_for,
)
from e2e.reducer.outcome import NO_LOCALIZATION, ReduceOutcome
from e2e.reducer.reduce import behavioural_ops, op_count, reduce_ops

DEFAULT_TIME_BOX = 60.0
# At most this long to find the pass a hanging stage hangs in (the passes before it run first).
HANG_LOCALIZE_SECONDS = 30.0


def _name_guilty_op(case: Case, text: str) -> str | None:
    if case.kind == ERROR:
        _, diagnostics = compile_signature(text, case.stage, case.pipeline, case.pipeline[-1])
        named = guilty_op(diagnostics)
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
) -> ReduceOutcome:
    """Reduce a localized compile failure or crash and write (or join) its bundle."""
    start = time.monotonic()
    case = localized.case
    target, shared = claim_bundle(reports_dir, test, config, case)
    if shared is not None:
        return shared

    # A candidate may make a pass loop forever: allow a few times what the original takes
    # (a hang case: its own hang_seconds, which observe applies).
    began = time.monotonic()
    if observe(case, localized.ir) != case.signature:
        return ReduceOutcome(note=f"the localized failure does not recur: {case.signature}", stopped=NO_LOCALIZATION)
    query_timeout = max(3.0, 5 * (time.monotonic() - began))

    def keeps(candidate: str) -> bool:
        return observe(case, candidate, timeout=query_timeout) == case.signature

    reduction = reduce_ops(localized.ir, keeps, deadline=start + time_box)
    case.guilty_op = _name_guilty_op(case, reduction.text)
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
        info, target, start=start, stopped="1-minimal" if reduction.minimal else TIME_BOX, verify=verify
    )


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
    toolchain: Sequence[str],
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

    `toolchain` compiles torch backend IR to LLVM; `arg_shapes` are the shapes (-1:
    dynamic) the config compiled for, so a dynamic-shape miscompile stays visible.
    """
    start = time.monotonic()
    try:
        search = GraphSearch(module, inputs, toolchain, arg_shapes=arg_shapes, tolerance=tolerance, method=method)
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
    return mismatch_bundle(
        found,
        found.guilty_op,
        toolchain,
        tolerance,
        notes,
        original_ir,
        found.stopped,
        start=start,
        test=test,
        config=config,
        reports_dir=reports_dir,
        verify=verify,
    )


def reduce_jit_mismatch(
    module,
    inputs,
    toolchain,
    *,
    test,
    config,
    reports_dir,
    tolerance=None,
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
) -> ReduceOutcome:
    """Wrong results only the JIT path gives: the first differing node of the TorchScript graph, alone."""
    from e2e.reducer.jit_graph import localize_jit

    start = time.monotonic()
    try:
        found = localize_jit(module, inputs, toolchain, tolerance=tolerance, deadline=start + time_box)
    except Exception as error:
        return ReduceOutcome(
            note=f"the TorchScript graph search failed: {type(error).__name__}: {error}"[:300], stopped=NO_LOCALIZATION
        )
    if isinstance(found, str):
        return ReduceOutcome(note=found, seconds=time.monotonic() - start, stopped=NO_LOCALIZATION)
    notes = [
        f"localized in the TorchScript graph ({found.nodes_searched} tensor-producing nodes, "
        f"{found.queries} queries): the first node whose compiled value differs from TorchScript's "
        f"own run, here alone with the native values of its inputs: `{found.node}`",
        f"compiled vs native: {found.detail}",
    ]
    return mismatch_bundle(
        found,
        "torch." + found.kind.replace("::", "."),
        toolchain,
        tolerance,
        notes,
        "",
        ONE_MINIMAL,
        start=start,
        test=test,
        config=config,
        reports_dir=reports_dir,
        verify=verify,
    )


def _same_failure(replayed: str, reported: str) -> bool:
    """The pass's own error, with or without the context a frontend prefixed to it.

    (The JIT configs report `ops unknown to the torch dialect ...: aten.vstack; <the pass's
    error>`; signatures are cut at 300 characters, so the longer one is compared as far as
    the shorter goes.)
    """
    if replayed == reported:
        return True
    replay, report = Signature.parse(replayed), Signature.parse(reported)
    if (replay.stage, replay.where) != (report.stage, report.where):
        return False
    message, rest = replay.message or "", report.message or ""
    if rest.startswith("ops unknown to the torch dialect") and "; " in rest:
        rest = rest.split("; ", 1)[1]
    shorter = min(len(rest), len(message))
    return shorter > 0 and rest[:shorter] == message[:shorter]


def _stage_input(result, ir_dir: Path) -> str | None:
    saved = sorted(ir_dir.glob(f"*-{result.stage}.mlir"))
    return saved[0].read_text() if saved else None


def reduce_result(result, prepared, config, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX) -> ReduceOutcome:
    """A failing pair's Result -> its bundle (or why there is none)."""
    reports_dir = Path(reports_dir)
    ir_dir = reports_dir / "ir" / result.test / config.name
    common = dict(test=result.test, config=config.name, reports_dir=reports_dir, time_box=time_box)
    if result.outcome == "timeout":
        return _reduce_hang(result, config, ir_dir, common)
    if result.stage == "compare" and config.toolchain().frontend == "onnx":
        from e2e.reducer.onnx_graph import reduce_onnx_result

        return reduce_onnx_result(result, prepared, config, reports_dir, time_box)
    if result.stage == "compare":
        # A dynamic test is called at several shapes: reduce the call that mismatched.
        method, call = prepared.failing_call(result.failing_call)
        shapes = prepared.arg_shapes(method)
        # LTC traces and eager ops are compiled for the example inputs' shapes.
        tries = [None] if config.toolchain().frontend in ("ltc", "eager") or shapes is None else [shapes, None]
        start = time.monotonic()
        for arg_shapes in tries:  # the test's dynamic dims first; then the example shapes
            outcome = reduce_mismatch(
                prepared.module,
                call,
                toolchain_for(config)["backend"],
                arg_shapes=arg_shapes,
                tolerance=prepared.test.tolerance,
                method=method,
                original_ir=(ir_dir / "3-backend.mlir").read_text() if (ir_dir / "3-backend.mlir").exists() else "",
                **{**common, "time_box": max(time_box - (time.monotonic() - start), 5.0)},
            )
            if outcome.bundle is not None:
                break
        if outcome.bundle is None and config.toolchain().frontend == "torchscript":
            jit = reduce_jit_mismatch(
                prepared.module,
                call,
                toolchain_for(config)["backend"],
                tolerance=prepared.test.tolerance,
                **{**common, "time_box": max(time_box - (time.monotonic() - start), 10.0)},
            )
            if jit.bundle is not None:
                return jit
            outcome.note = f"{outcome.note}; in the TorchScript graph: {jit.note}"
        return outcome
    if result.stage in ("capture", "import") and getattr(prepared.module, "onnx_model", None) is not None:
        return ReduceOutcome(
            note=f"the ONNX model is the test's own: {ir_dir / 'model.onnx'} is what the importer was given",
            stopped=NO_LOCALIZATION,
        )
    if result.stage in ("capture", "import") and result.outcome != "crash":
        from e2e.reducer.frontend import reduce_frontend

        return reduce_frontend(
            result, prepared, config, reports_dir, time_box, bundle_dir_for(reports_dir, result.test, config.name)
        )
    stage_input = _stage_input(result, ir_dir)
    if result.outcome == "crash" and result.stage == "execute":
        return _reduce_execute_crash(result, config, ir_dir, common)
    if result.outcome == "crash":
        if stage_input is None or result.stage not in ("torch-backend", "backend", "lower"):
            return ReduceOutcome(
                note=f"a crash in stage {result.stage} is not reduced (no pass pipeline to replay)",
                stopped=NO_LOCALIZATION,
            )
        localized = localize_crash(stage_input, stage_pipeline(config, result.stage, stage_input), result.stage)
        if localized is None:
            return ReduceOutcome(
                note="the crash did not recur when the stage was replayed pass by pass", stopped=NO_LOCALIZATION
            )
        return reduce_localized(localized, original_ir=stage_input, **common)
    if not result.failing_pass:
        return ReduceOutcome(
            note=f"no MLIR pass failed (stage {result.stage}); nothing to reduce at the IR level",
            stopped=NO_LOCALIZATION,
        )
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
        localized = localize_error(stage_input, stage_pipeline(config, result.stage, stage_input), result.stage)
    if localized is None:
        return ReduceOutcome(note="the failure did not recur when its stage was replayed", stopped=NO_LOCALIZATION)
    if not _same_failure(localized.case.signature, result.signature):
        return ReduceOutcome(
            note=f"replaying shows another signature: {localized.case.signature}", stopped=NO_LOCALIZATION
        )
    return reduce_localized(localized, original_ir=stage_input or localized.ir, **common)


def _reduce_hang(result, config, ir_dir: Path, common: dict) -> ReduceOutcome:
    """A compile stage that hangs: the pass it hangs in, found pass by pass in a child, and
    the smallest input on which that pass still gives no result in `HANG_SECONDS`."""
    stage_input = _stage_input(result, ir_dir)
    if stage_input is None or result.stage not in ("torch-backend", "backend", "lower"):
        return ReduceOutcome(
            note=f"a timeout in stage {result.stage} is not reduced (no pass pipeline to replay)",
            stopped=NO_LOCALIZATION,
        )
    budget = HANG_LOCALIZE_SECONDS
    localized = localize_crash(
        stage_input, stage_pipeline(config, result.stage, stage_input), result.stage, budget, hang=True
    )
    if localized is None:
        return ReduceOutcome(
            note=f"the stage finished when replayed pass by pass in {budget:.0f} s: slow, not hung",
            stopped=NO_LOCALIZATION,
        )
    return reduce_localized(localized, original_ir=stage_input, **common)


def _reduce_execute_crash(result, config, ir_dir: Path, common: dict) -> ReduceOutcome:
    """The backend IR that crashes when lowered and run, reduced with the crash as its signature."""
    from compiler.replay_runtime import passes

    saved = sorted(ir_dir.glob("*-lower.mlir"))
    if not saved:
        return ReduceOutcome(
            note="no saved input of stage lower to replay the execute crash from", stopped=NO_LOCALIZATION
        )
    text = saved[0].read_text()
    pipeline = [passes.RECORD, *toolchain_for(config)["lower"], passes.INVOKE]
    observed = observe(Case(CRASH, "execute", pipeline, ""), text)
    if not (observed or "").startswith("crash |"):
        return ReduceOutcome(
            note=f"the module did not crash when lowered and run on made-up inputs: {observed}", stopped=NO_LOCALIZATION
        )
    case = Case(CRASH, "execute", pipeline, observed)
    return reduce_localized(Localized(case, text, []), original_ir=text, **common)


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
