"""What a bundle's README opens with: the issue a maintainer would file, as fields.

The title names the component's tag, the failing pass and what goes wrong on which op
(`[torch-mlir] torch-adjust-calling-conventions crashes (SIGSEGV) in AtenAnyDimsOp::fold on
torch.aten.any.dims`); then what torch gives and what the compiled program gives. Made from
typed inputs (the case, the upstream command's step and run, the arrays), never from text
written for a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from compiler.replay_runtime.replay import CRASH, HANG, MISMATCH, Case
from e2e.framework.signature import pass_name
from e2e.reducer.upstream import Component, Upstream, UpstreamStep, miscompiles, signal_name

TITLE_CHARS = 160
RUNS = "runs the program (the bug is in compiling it)"
# A wrong result's kind (`compare | <kind>`) in a title's words.
MISMATCH_WORDS = {
    "values": "wrong values",
    "shape": "a wrong shape",
    "dtype": "a wrong dtype",
    "nan": "wrong NaNs",
    "inf": "wrong infinities",
}


@dataclass(frozen=True)
class Issue:
    title: str  # one line, `[tag] ...`
    component: Component
    failing_pass: str
    torch_gives: str
    compiled_gives: str


def issue_of(
    case: Case,
    upstream: Upstream,
    expected: Sequence[np.ndarray] | None = None,
    actual: Sequence[np.ndarray] | None = None,
    replay_report: str = "",
) -> Issue:
    """The issue of a bundle: `expected` torch's values (a mismatch), `actual` the compiled
    program's when the reducer kept them, else `replay_report` (what repro.py printed) says it."""
    step = upstream.step
    failing = step.failing_pass if isinstance(step, UpstreamStep) else pass_name(case.pipeline[-1])
    op = _ops(case.guilty_op)
    run = upstream.run
    how = (signal_name(run.exit) if run and run.exit is not None else None) or _message(case).removeprefix(
        "Fatal Python error: "
    )
    if miscompiles(case) and case.kind == MISMATCH:
        words = MISMATCH_WORDS.get(case.signature.where or "", f"a wrong result ({case.signature.where})")
        title = f"{failing}: {op} lowered to {words}"
        compiled = _arrays(actual) if actual is not None else _first_line(replay_report) or str(case.signature)
        torch = _arrays(expected) if expected is not None else "the values in expected.npz"
    elif miscompiles(case):
        title = f"{failing}: the compiled program ({op}) crashes when run ({how})"
        torch, compiled = RUNS, f"the compiled program dies when run: {how}"
    elif case.kind == CRASH:
        frame = _op_frame(run.frames) if run else None
        title = f"{failing} crashes ({how}){f' in {frame}' if frame else ''} on {op}"
        frames = f"; innermost frames: {', '.join(run.frames)}" if run and run.frames else ""
        torch, compiled = RUNS, f"the compiler dies in `{failing}` ({how}){frames}"
    elif case.kind == HANG:
        title = f"{failing} hangs on {op}"
        torch = RUNS
        compiled = f"`{failing}` gives no result in {case.hang_seconds or 0:.0f} s"
    else:
        judged = isinstance(step, UpstreamStep) and step.judged_by is not None
        title = f"{failing} {'breaks the result types of' if judged else 'fails on'} {op}: {_message(case)}"
        torch = RUNS
        compiled = f"`{failing}` fails: {_message(case)}" + (f" ({step.judged_by})" if judged else "")
    title = f"[{upstream.component.tag}] {title}"
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 3] + "..."
    return Issue(title, upstream.component, failing, torch, compiled)


def _ops(guilty_op: str | None) -> str:
    """`torch.aten.view`; `torch.aten.view and 3 more ops` (a crash's bundle may name several)."""
    ops = [op.strip() for op in (guilty_op or "").split(",") if op.strip()]
    if not ops:
        return "its module"
    return ops[0] if len(ops) == 1 else f"{ops[0]} and {len(ops) - 1} more op{'s' if len(ops) > 2 else ''}"


def _message(case: Case) -> str:
    """The signature's message without its location and the op it names (the title names it)."""
    return re.sub(r"^(loc: )?('[\w.]+': )?", "", case.signature.message or case.signature.format())


def _op_frame(frames: Sequence[str]) -> str | None:
    """The innermost frame in an op's own method (a fold, a pattern): `AtenAnyDimsOp::fold`."""
    for frame in frames:
        match = re.search(r"(\w+Op)::(\w+)$", frame)
        if match and match[1] != "Operation":
            return f"{match[1]}::{match[2]}"
    return "::".join(frames[0].split("::")[-2:]) if frames else None


def _arrays(arrays: Sequence[np.ndarray]) -> str:
    """`output 0: int8 [1, 3, 3] [-1 -3 6 4 ...]` for each output."""
    parts = []
    for i, array in enumerate(arrays):
        array = np.asarray(array)
        flat = array.reshape(-1)
        values = np.array2string(flat[:6], separator=" ", threshold=6, precision=4)[1:-1]
        more = " ..." if flat.size > 6 else ""
        parts.append(f"output {i}: {array.dtype} {list(array.shape)} [{values}{more}]")
    return "; ".join(parts) or "no outputs"


def _first_line(report: str) -> str:
    return next((line.strip() for line in report.splitlines() if line.strip() and "REPRODUCED" not in line), "")
