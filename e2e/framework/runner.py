"""Run one test on one config: golden trace, isolated compile and run, compare, Result.

A test host (`e2e.framework.host`) computes each test's golden trace once, with what its
configs share (a frontend's capture, import and torch-backend IR): its `PreparedTest`
(`e2e.framework.prepared`). `attempt_pair` compiles, runs and compares one config in
the process it is called in (a test host, a child `run_pair` forks, or the pytest
process under `--no-isolation`); `finish_pair`, in the process that waited, makes the
pair's Result of what came back: a crash or a hang of that process ends as the pair's
`crash` / `timeout` Result. The IR of every stage is written to
`reports/ir/<test>/<config>/` before the stage runs, and kept when the pair fails.
"""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path

import torch

from compiler.stages import Snapshots, StageError, snapshot_path, write_atomic
from e2e.framework import hang_stack, isolation
from e2e.framework.compare import compare_traces
from e2e.framework.isolation import Limits
from e2e.framework.judge import Annotated, Closable, Explanation, Outcome, explain
from e2e.framework.prepared import PreparedTest
from e2e.framework.registry import Test
from e2e.framework.result import (
    CRASH,
    ERROR,
    FAIL,
    MEMORY,
    PASS,
    SKIP,
    TIMEOUT,
    NotApplicable,
    Result,
    Twinned,
)
from e2e.framework.signature import (
    broken_test_signature,
    crash_signature,
    ended_signature,
    mismatch_signature,
    stage_signature,
)


def warm_up(config) -> None:
    """A config's one-time initialization in this process (its optional `warm_up`, e.g. its
    frontend's first capture), before a fork, for callers outside the suite's plugin (the
    suite warms up through `e2e.session`)."""
    warm = getattr(config, "warm_up", None)
    if warm is not None:
        warm()


def _compile_and_run(config, prepared: PreparedTest, snapshots: Snapshots) -> tuple[Result, dict]:
    """Compile and run (the config), judge (here, once), explain (the config's explainers, then the test's)."""
    outcome = _compile_and_run_once(config, prepared, snapshots)
    if isinstance(outcome, Result):  # not applicable: skipped
        return outcome, prepared.new_shared
    explanations = explain(config, prepared, outcome)
    result = _result_of(prepared.test, config.name, outcome, explanations)
    if isinstance(config, Twinned):
        result.twin = config.twin
    notes = list(outcome.artifact.notes) if isinstance(outcome.artifact, Annotated) else []
    notes += [f"shared: reused {key} from an earlier config of this test" for key in sorted(map(repr, prepared.reused))]
    notes += [
        f"frontend cache: reused {key} from an earlier run" for key in sorted(map(repr, prepared.from_earlier_run))
    ]
    result.stages_from_cache = list(snapshots.memo_hits)
    if snapshots.memo_hits:
        notes.append(
            f"program cache: stages {', '.join(snapshots.memo_hits)} taken from an earlier compile of the same input"
        )
    notes += [note for explanation in explanations for note in explanation.notes]
    result.notes = list(dict.fromkeys(notes))
    # The stages' clock stops here: freeing the program below is no stage's time (an eager
    # pair frees an ExecutionEngine per op, ~2 ms each, which `compare` used to carry).
    result.stage_seconds = snapshots.stage_seconds()
    # A test host runs every config of its test: free each one's ExecutionEngines, unless
    # the program misbehaved (its heap may be corrupt: freeing can abort or hang; the
    # host retires instead).
    if not result.ran_and_failed and isinstance(outcome.artifact, Closable):
        outcome.artifact.close()
    return result, prepared.new_shared


def _compile_and_run_once(config, prepared: PreparedTest, snapshots: Snapshots) -> Outcome | Result:
    """What the config built and ran, compared with the golden trace: an Outcome; a
    config that cannot honour the test: its `skip` Result."""
    artifact = None
    try:
        artifact = config.compile(prepared, snapshots)
        snapshots.enter("execute")
        trace = config.run(artifact, prepared.golden)
    except NotApplicable as error:
        stage = snapshots.current or "capture"
        return Result(prepared.test.name, config.name, SKIP, stage=stage, error=str(error))
    except StageError as error:
        return Outcome(error.stage, error=error, artifact=artifact, ir_dir=snapshots.directory)
    except Exception as error:
        return Outcome(snapshots.current or "capture", error=error, artifact=artifact, ir_dir=snapshots.directory)
    snapshots.enter("compare")
    mismatch = compare_traces(prepared.golden, trace, prepared.test.tolerance)
    stage = None if mismatch is None else "compare"
    return Outcome(stage, mismatch=mismatch, artifact=artifact, trace=trace, ir_dir=snapshots.directory)


def _result_of(test: Test, config: str, outcome: Outcome, explanations: list[Explanation]) -> Result:
    """The pair's Result: the runner's judgement, or the stage an explainer moved it to."""
    result = Result(test.name, config, PASS if outcome.passed else FAIL, stage=outcome.stage)
    for explanation in explanations:
        if explanation.verdict is not None:
            result.verdict, result.verdict_reason = explanation.verdict, explanation.verdict_reason
        if explanation.check is not None:
            result.check, result.check_turned_away = explanation.check, explanation.turned_away
    moved = next((explanation for explanation in explanations if explanation.stage is not None), None)
    error = outcome.error
    if any(explanation.acquit for explanation in explanations):
        result.outcome, result.stage = PASS, None
    elif moved is not None:
        result.outcome, result.stage, result.error = FAIL, moved.stage, moved.error or ""
        result.signature = stage_signature(moved.stage, result.error)
    elif outcome.mismatch is not None:
        result.signature = mismatch_signature(outcome.mismatch.kind)
        result.error, result.failing_call = str(outcome.mismatch), outcome.mismatch.call
    elif isinstance(error, StageError):
        result.signature = stage_signature(error.stage, error.message, error.failing_pass)
        result.error, result.failing_pass = _stage_error_text(error), error.failing_pass
        if error.input_ir and outcome.ir_dir is not None:
            name = "failing-pass-input.mlir" if error.failing_pass else f"{error.stage}-input.mlir"
            write_atomic(outcome.ir_dir / name, error.input_ir)
            result.ir_path = str(outcome.ir_dir / name)
    elif error is not None:
        result.signature = stage_signature(outcome.stage, f"{type(error).__name__}: {error}")
        trace = "".join(traceback.format_exception(error, limit=-6))
        result.error = f"{type(error).__name__}: {error}\n{trace}"
    return result


def _stage_error_text(error: StageError) -> str:
    lines = [error.message]
    if error.failing_pass:
        lines.append(f"failing pass: {error.failing_pass}")
    lines.extend(error.diagnostics[1:8])
    return "\n".join(lines)


# A pair runs in one of three places, each with the same attempt and the same finish:
# on its test's host (`e2e.framework.host`, the plugin's way), in a child forked for it
# (`run_pair(isolate=True)`: the reducer's CLI, benchmarks), or in the calling process
# (`--no-isolation`). Which one the plugin takes is decided in `e2e.session` alone.


def attempt_pair(prepared: PreparedTest, config, reports_dir: Path) -> tuple[Result, dict] | isolation.Raised:
    """Compile, run and compare one config in this process, whichever it is: the pair's
    Result and what it newly computed for the test's other configs, or the framework
    error that escaped (`isolation.Raised`). Run it where a crash or hang is contained."""
    ir_dir = pair_ir_dir(reports_dir, prepared.test.name, config.name)
    shutil.rmtree(ir_dir, ignore_errors=True)
    snapshots = Snapshots(ir_dir, memo=prepared.program_cache)  # stage outputs of earlier pairs and runs
    prepared.new_shared, prepared.reused, prepared.from_earlier_run = {}, set(), set()

    def attempt() -> tuple[Result, dict]:
        torch.set_num_threads(1)
        result, shared = _compile_and_run(config, prepared, snapshots)
        if not result.stage_seconds:  # a skip, returned before judging
            result.stage_seconds = snapshots.stage_seconds()
        return result, shared

    return isolation.call_reporting(attempt)


def finish_pair(
    test: Test, config: str, outcome, *, reports_dir: Path, start: float, peak_bytes: int, shape_mode: str
) -> Result:
    """The pair's Result, wherever it ran: the attempt's own Result, or how the process
    it ran in ended (crash, timeout, memory, framework error) in the stage its IR snapshots
    name; timed from `start` by the caller, with the peak memory the pair added; a passing
    pair's IR dropped."""
    ir_dir = pair_ir_dir(reports_dir, test.name, config)
    if isinstance(outcome, Result):
        result = outcome
    else:
        result = abnormal_result(test, config, outcome, current_stage(ir_dir), ir_dir=ir_dir)
        peak_bytes = max(peak_bytes, getattr(outcome, "peak_rss", 0))
    result.duration = time.monotonic() - start
    result.peak_rss_mib = round(peak_bytes / isolation.MIB, 1)
    result.shape_mode = shape_mode
    keep_ir(result, ir_dir)
    return result


def broken_test_result(test: Test, config: str, kind: str | None, error: str) -> Result:
    """Every config's Result of a test broken on native torch (`PreparedTest.golden_kind`)."""
    return Result(
        test.name,
        config,
        ERROR,
        stage="golden",
        signature=broken_test_signature(kind),
        error=f"{error}\n(defined at {test.source})",
    )


def run_pair(
    prepared: PreparedTest,
    config,
    *,
    reports_dir: Path,
    limits: Limits,
    isolate: bool = True,
) -> Result:
    """One (test, config) pair, end to end, never raising for a compiler failure.

    `isolate`: the attempt runs in a child forked for it, under `limits`; without it, in
    this process (`--no-isolation`: nothing contains a crash or a hang, `limits` do not
    apply). A framework exception becomes the pair's `error` result.
    """
    test = prepared.test
    if prepared.golden_error is not None:
        return broken_test_result(test, config.name, prepared.golden_kind, prepared.golden_error)
    start, peak = time.monotonic(), 0
    if isolate:
        warm_up(config)
        forked = isolation.Child(
            lambda channel: (channel.receive(), channel.send(attempt_pair(prepared, config, reports_dir)))
        )
        try:
            outcome = forked.request("go", limits, diagnose=True)
        finally:
            peak = forked.request_peak_rss
            forked.close()
    else:
        outcome = attempt_pair(prepared, config, reports_dir)
    if isinstance(outcome, tuple) and len(outcome) == 2 and isinstance(outcome[1], isolation.Raised):
        outcome = outcome[1]  # the child's reply did not pickle (`Channel.send`): a framework error, its traceback kept
    elif isinstance(outcome, tuple):
        outcome, new_shared = outcome
        prepared.shared.update(new_shared)
    return finish_pair(
        test,
        config.name,
        outcome,
        reports_dir=reports_dir,
        start=start,
        peak_bytes=peak,
        shape_mode=prepared.shape_mode,
    )


def set_aside_first_attempt(result: Result, reports_dir: Path) -> Path:
    """Before a timed-out pair is run again (which starts from an empty IR directory):
    move its IR and hang stack to `<config>.first-attempt/` beside it, and point the
    Result's paths there. The new directory."""
    ir_dir = pair_ir_dir(reports_dir, result.test, result.config)
    first = ir_dir.with_name(f"{result.config}.first-attempt")
    shutil.rmtree(first, ignore_errors=True)
    if ir_dir.exists():
        ir_dir.rename(first)
    old, new = str(ir_dir) + "/", str(first) + "/"
    result.error = result.error.replace(old, new)
    if result.ir_path is not None:
        result.ir_path = result.ir_path.replace(old, new)
    return first


def after_rerun(first: Result, rerun: Result, first_dir: Path) -> Result:
    """A timed-out pair's Result once it ran again in a fresh test host: a second timeout
    confirms the hang (the first Result stands, noted); anything else is the pair's
    Result, which keeps the stage the first attempt hung in (`Result.hung_first`)."""
    stack = first_dir / hang_stack.FILE_NAME
    where = f"its IR and stack: {first_dir}" if stack.exists() else f"its IR: {first_dir}"
    if rerun.outcome == TIMEOUT:
        first.notes.append(
            f"rerun in a fresh test host under the same limits: timeout in stage {rerun.stage} again, the hang "
            f"reproduces (the rerun's IR and threads: {first_dir.with_name(first.config)}; gdb's backtrace is the first attempt's)"
        )
        first.duration += rerun.duration
        return first
    rerun.hung_first = first.stage
    rerun.notes.append(
        f"hung once: the first attempt timed out in stage {first.stage} ({first.error.splitlines()[0]}; {where}); "
        f"this is the rerun's result, in a fresh test host under the same limits"
    )
    rerun.notes += [f"first attempt: {note}" for note in first.notes]
    rerun.duration += first.duration
    return rerun


def pair_ir_dir(reports_dir: Path, test: str, config: str) -> Path:
    """Where a pair's stages write the IR they are given (kept when the pair fails)."""
    return reports_dir / "ir" / test / config


def keep_ir(result: Result, ir_dir: Path) -> None:
    """Drop a passing pair's IR; point a failing one at the IR its stage was given."""
    if result.passed:
        shutil.rmtree(ir_dir, ignore_errors=True)
    elif result.ir_path is None and result.stage is not None:
        saved = snapshot_path(ir_dir, result.stage)
        result.ir_path = str(saved) if saved.is_file() else None


def current_stage(ir_dir: Path) -> str:
    """The stage a pair was in, from the marker its snapshots keep (for a process that died)."""
    marker = ir_dir / "current-stage"
    return marker.read_text().strip() if marker.exists() else "capture"


def abnormal_result(test: Test, config: str, outcome, stage: str, *, ir_dir: Path | None = None) -> Result:
    """The Result of a child that timed out, crashed, outgrew its memory cap, or raised
    past its own handling, in `stage`; a timed-out child's stack (`TimedOut.stack`) is
    written to `ir_dir` and named in the error."""
    if isinstance(outcome, isolation.TimedOut):
        kind, signature = TIMEOUT, ended_signature(TIMEOUT, stage)
        if outcome.deadlock:
            error = f"timeout in stage {stage}: {outcome.deadlock}; killed then, within the {outcome.seconds:.0f} s budget\n"
        else:
            error = f"timeout in stage {stage}: no result after {outcome.seconds:.0f} s (killed)\n"
        if outcome.stack is not None and ir_dir is not None:
            ir_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(ir_dir / hang_stack.FILE_NAME, outcome.stack.text)
            error += f"when killed: {outcome.stack.summary}; threads and stacks: {ir_dir / hang_stack.FILE_NAME}\n"
        error += outcome.stderr_tail[-2000:]
    elif isinstance(outcome, isolation.OverMemory):
        kind, signature = MEMORY, ended_signature(MEMORY, stage)
        error = (
            f"over the memory cap in stage {stage}: the child grew past the cap of "
            f"{outcome.limit / isolation.GIB:.1f} GiB per pair ({outcome.peak_rss / isolation.GIB:.2f} GiB "
            f"resident; killed; raise it with --memory-cap)\n{outcome.stderr_tail[-1500:]}"
        )
    elif isinstance(outcome, isolation.Crashed):
        kind, signature = CRASH, crash_signature(stage, outcome.stderr_tail, outcome.reason)
        error = f"crash in stage {stage}: the process was {outcome.reason}\n{_crash_text(outcome.stderr_tail)}"
    elif isinstance(outcome, isolation.Raised):  # a framework bug
        kind, signature = ERROR, ended_signature("framework", stage)
        error = f"internal error in stage {stage}:\n{outcome.traceback}"
    else:
        kind, signature = ERROR, ended_signature("framework", stage)
        error = f"internal error in stage {stage}: unexpected reply {outcome!r:.300}"
    peak = getattr(outcome, "peak_rss", 0)
    result = Result(test.name, config, kind, stage=stage, signature=signature, error=error.strip())
    result.peak_rss_mib = round(peak / isolation.MIB, 1)
    return result


def _crash_text(stderr: str) -> str:
    """What a person needs of a crashed child's stderr: the native messages before the
    crash, and the innermost frames of faulthandler's Python stack (printed first)."""
    marker = stderr.find("Fatal Python error")
    if marker < 0:
        return stderr[-3000:]
    return (stderr[max(0, marker - 1500) : marker] + stderr[marker : marker + 3000]).strip()
