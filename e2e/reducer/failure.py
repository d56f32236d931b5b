"""From a failure to a verified bundle: localize, reduce, bundle (the reducer's entry points).

    reduce_result(result, prepared, config, reports_dir)     # a failing (test, config) pair
    reduce_mlir(text, pipeline, stage, error_pattern=...)     # a .mlir file and a pipeline
    reduce_mismatch(module, inputs, toolchain, ...)           # wrong results, node by node
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from e2e.reducer.bundle import BundleInfo, add_test, claim, signature_key, write_bundle
from e2e.reducer.case import ERROR, Case, compile_signature, observe
from e2e.reducer.localize import (
    Localized,
    localize_crash,
    localize_error,
    localize_mismatch,
    mismatch_case,
    parses,
    stage_pipeline,
    toolchain_for,
)
from e2e.reducer.reduce import behavioural_ops, op_count, reduce_ops
from e2e.reducer.signature import guilty_op

DEFAULT_TIME_BOX = 60.0


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

    def summary(self) -> str:
        """One line for Result.notes (the benchmark parses the key=value pairs)."""
        if self.bundle is None:
            return f"reducer: no bundle: {self.note}"
        return (
            f"reducer: bundle={self.bundle} verified={self.verified} shared={self.shared} "
            f"ops_before={self.ops_before} ops_after={self.ops_after} queries={self.queries} "
            f"seconds={self.seconds:.2f} guilty_op={self.guilty_op or '-'}"
        )


def bundle_dir_for(reports_dir: Path, test: str, config: str) -> Path:
    return Path(reports_dir) / "repro" / test / config


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
    target = bundle_dir_for(reports_dir, test, config)
    owner = claim(Path(reports_dir) / "repro", signature_key(config, case), target)
    if owner is not None:
        add_test(owner, test, config)
        return ReduceOutcome(owner, True, True, guilty_op=case.guilty_op, note=f"shares the bundle of {owner}")

    def keeps(candidate: str) -> bool:
        return observe(case, candidate) == case.signature

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
    verified, detail = write_bundle(info, target, check=verify)
    return ReduceOutcome(
        target, verified, False, info.ops_before, info.ops_after, reduction.queries,
        time.monotonic() - start, case.guilty_op, detail,
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
        return ReduceOutcome(note="the pipeline does not " + ("crash" if crash else "fail") + " on this module")
    if error_pattern and not re.search(error_pattern, "\n".join(localized.diagnostics)):
        return ReduceOutcome(note=f"the failure does not match {error_pattern!r}: {localized.case.signature}")
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
    tolerance=None,
    method: str = "forward",
    original_ir: str = "",
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
) -> ReduceOutcome:
    """Wrong results: the first FX node that disagrees, as a one-node torch-dialect module."""
    start = time.monotonic()
    found = localize_mismatch(module, inputs, toolchain, tolerance=tolerance, deadline=start + time_box, method=method)
    if found is None:
        return ReduceOutcome(note="no single FX node disagrees with its golden value (a bug of node combinations?)")
    case = mismatch_case(found, toolchain, tolerance)
    target = bundle_dir_for(reports_dir, test, config)
    owner = claim(Path(reports_dir) / "repro", signature_key(config, case), target)
    if owner is not None:
        add_test(owner, test, config)
        return ReduceOutcome(owner, True, True, guilty_op=case.guilty_op, note=f"shares the bundle of {owner}")
    ops_after = op_count(found.torch_backend_ir)
    info = BundleInfo(
        test, config, case, found.torch_backend_ir, original_ir or found.torch_backend_ir,
        op_count(original_ir) if original_ir else ops_after, ops_after,
        queries=found.nodes_checked, seconds=time.monotonic() - start, minimal=True,
        inputs=found.inputs, expected=found.expected,
        notes=[f"first disagreeing FX node (of {found.nodes_checked} checked with golden inputs): `{found.node}`"],
    )
    verified, detail = write_bundle(info, target, check=verify)
    return ReduceOutcome(
        target, verified, False, info.ops_before, ops_after, found.nodes_checked,
        time.monotonic() - start, case.guilty_op, detail,
    )


def _stage_input(result, ir_dir: Path) -> str | None:
    saved = sorted(ir_dir.glob(f"*-{result.stage}.mlir"))
    return saved[0].read_text() if saved else None


def reduce_result(result, prepared, config, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX) -> ReduceOutcome:
    """A failing pair's Result -> its bundle (or why there is none)."""
    reports_dir = Path(reports_dir)
    ir_dir = reports_dir / "ir" / result.test / config.name
    common = dict(test=result.test, config=config.name, reports_dir=reports_dir, time_box=time_box)
    if result.outcome == "timeout":
        return ReduceOutcome(note="timeouts are not reduced (each query could take as long)")
    if result.stage == "compare":
        method = prepared.methods()[0]
        return reduce_mismatch(
            prepared.module,
            prepared.first_call(method),
            toolchain_for(config)["backend"],
            tolerance=prepared.test.tolerance,
            method=method,
            original_ir=(ir_dir / "3-backend.mlir").read_text() if (ir_dir / "3-backend.mlir").exists() else "",
            **common,
        )
    stage_input = _stage_input(result, ir_dir)
    if result.outcome == "crash":
        if stage_input is None or result.stage not in ("torch-backend", "backend", "lower"):
            return ReduceOutcome(note=f"a crash in stage {result.stage} is not reduced (no pass pipeline to replay)")
        localized = localize_crash(stage_input, stage_pipeline(config, result.stage, stage_input), result.stage)
        if localized is None:
            return ReduceOutcome(note="the crash did not recur when the stage was replayed pass by pass")
        return reduce_localized(localized, original_ir=stage_input, **common)
    if not result.failing_pass:
        return ReduceOutcome(note=f"no MLIR pass failed (stage {result.stage}); nothing to reduce at the IR level")
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
        return ReduceOutcome(note="the failure did not recur when its stage was replayed")
    if localized.case.signature != result.signature:
        return ReduceOutcome(note=f"replaying shows another signature: {localized.case.signature}")
    return reduce_localized(localized, original_ir=stage_input or localized.ir, **common)
