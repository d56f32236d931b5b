"""Finishing a reduction: where a failure's bundle goes, a localized mismatch written as a
bundle (or shared with the bundle of the same bug), and the outcomes every search reports.

Below the searches (MLIR ops, FX and ONNX graph groups, the JIT graph) and the dispatcher
(`failure.py`), so each of them finishes the same way without importing another.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from e2e.reducer.bundle import (
    BundleInfo,
    add_test,
    child_seconds,
    claim,
    index_root,
    signature_key,
    write_bundle,
)
from e2e.reducer.case import MISMATCH, PYTHON_PASS, Case
from e2e.reducer.graph import ONE_MINIMAL
from e2e.reducer.outcome import NO_LOCALIZATION, SHARED, ReduceOutcome
from e2e.reducer.reduce import op_count


def bundle_dir_for(reports_dir: Path, test: str, config: str) -> Path:
    return Path(reports_dir) / "repro" / test / config


def claim_bundle(
    reports_dir, test: str, config: str, case: Case, within: str = "", ir: str | None = None
) -> tuple[Path, ReduceOutcome | None]:
    """Where this failure's bundle goes (`within` a subdirectory of the pair's bundle
    directory: a second bundle of the pair), and, when an earlier failure with the same
    signature wrote one, the outcome of sharing it (this test is added to it).

    A failure whose guilty op is not known before its reduction (a crash: its signature
    names no op) shares only a bundle of its signature whose guilty ops all occur in its
    `ir`; with none, it is reduced on its own and its bundle joins the signature's (`claim`):
    one bundle per signature gave every crash of a campaign block the first one's op."""
    target = bundle_dir_for(reports_dir, test, config) / within
    fits = None
    if ir is not None and case.guilty_op is None:
        fits = lambda bundle: _guilty_ops_occur(bundle, ir)  # noqa: E731
    owner = claim(index_root(reports_dir), signature_key(config, case), target, fits)
    if owner is None:
        return target, None
    add_test(owner, test, config)
    shared = ReduceOutcome(
        owner, True, True, guilty_op=case.guilty_op, note=f"shares the bundle of {owner}", stopped=SHARED
    )
    return target, shared


def _guilty_ops_occur(bundle: Path, ir: str) -> bool:
    """Whether every op the bundle's case names guilty (`a,b`) occurs in `ir` (a bundle that
    names none fits any)."""
    try:
        named = json.loads((bundle / "case.json").read_text()).get("guilty_op") or ""
    except (OSError, ValueError):
        return False
    ops = [op.strip() for op in named.split(",") if op.strip() not in ("", "-")]
    return all(f"{op} " in ir or f'"{op}"' in ir for op in ops)  # custom or generic form


def write_outcome(
    info: BundleInfo, target: Path, *, start: float, stopped: str, verify: bool, time_box: float
) -> ReduceOutcome:
    """Write the bundle `info` describes (re-verified in a fresh process when `verify`, within
    `child_seconds(time_box)`) and say what the reduction ended with."""
    written = time.monotonic()
    verified, detail = write_bundle(info, target, check=verify, timeout=child_seconds(time_box))
    return ReduceOutcome(
        target,
        verified,
        False,
        info.ops_before,
        info.ops_after,
        info.queries,
        time.monotonic() - start,
        info.case.guilty_op,
        detail,
        stopped=stopped,
        verify_seconds=time.monotonic() - written,
        failing_step=failing_step(info.case),
    )


def failing_step(case: Case) -> str | None:
    """The pipeline entry a bundle's bug is in: the last of the compiler's own (the project's
    checks after it, `types_agree`, `results_as_torch`, are not); for a wrong result or a crash
    while the program ran, the first (the lowering that miscompiles or wrote the failing check:
    the entries after it only lower it further)."""
    compiler_entries = [entry for entry in case.pipeline if not entry.startswith(PYTHON_PASS)]
    if not compiler_entries:
        return case.pipeline[-1] if case.pipeline else None
    if case.kind == MISMATCH or case.stage == "execute":
        return compiler_entries[0]
    return compiler_entries[-1]


def nothing_localized(why: str, search, start: float) -> ReduceOutcome:
    """A group search (FX or ONNX nodes) that found no group: why, and what it cost."""
    return ReduceOutcome(note=why, queries=search.queries, seconds=time.monotonic() - start, stopped=NO_LOCALIZATION)


def crashed_queries_note(count: int) -> str:
    return (
        f"{count} candidate group(s) crashed, hung or outgrew the cap when compiled "
        "and run; each was taken as not showing the mismatch, and the search went on"
    )


def mismatch_bundle(
    found,
    guilty: str,
    to_executor,
    tolerance,
    notes: list[str],
    original_ir: str,
    stopped: str,
    *,
    start: float,
    test: str,
    config: str,
    reports_dir,
    verify: bool,
    time_box: float,
    expected_from: str = "native PyTorch",
    files: dict[str, bytes] | None = None,
    actual: list | None = None,
) -> ReduceOutcome:
    """A localized mismatch (`found`: its IR, inputs, expected values, dtypes, signature,
    queries) as a bundle, or a share of the bundle of the same bug. `to_executor` (pass entries) compiles
    `found.torch_backend_ir` (for the onnx config: raw torch-onnx IR); `files` go into the bundle too;
    `actual`, the compiled program's values, goes into its README beside torch's."""
    case = Case(
        MISMATCH,
        "compare",
        list(to_executor),
        found.signature,
        guilty_op=guilty,
        result_dtypes=found.result_dtypes,
        tolerance=(tolerance.rtol, tolerance.atol) if tolerance else None,
    )
    target, shared = claim_bundle(reports_dir, test, config, case)
    if shared is not None:
        return shared
    ops_after = op_count(found.torch_backend_ir)
    info = BundleInfo(
        test,
        config,
        case,
        found.torch_backend_ir,
        original_ir or found.torch_backend_ir,
        op_count(original_ir) if original_ir else ops_after,
        ops_after,
        queries=found.queries,
        seconds=time.monotonic() - start,
        minimal=stopped == ONE_MINIMAL,
        inputs=found.inputs,
        expected=found.expected,
        notes=notes,
        expected_from=expected_from,
        files=dict(files or {}),
        actual=actual,
    )
    return write_outcome(info, target, start=start, stopped=stopped, verify=verify, time_box=time_box)
