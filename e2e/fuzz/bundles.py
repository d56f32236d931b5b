"""What a failure's bundle tells a campaign's triage, read from its files: its case
(`case.json`: guilty op, pipeline), the op kinds of its reduced program (`repro.mlir`), and
where a crash's program ends (`crash_site`)."""

from __future__ import annotations

import json
from pathlib import Path


def bundle_case(repro: str | None) -> dict:
    """A bundle's `case.json` ({} for none): its guilty op and pipeline, for rows written
    before a Result had the reducer's fields."""
    if not repro:
        return {}
    try:
        return json.loads((Path(repro) / "case.json").read_text())
    except (OSError, ValueError):
        return {}


def bundle_ops(bundle: str | Path | None) -> tuple[str, ...]:
    """The kinds of op a bundle's reduced program (`repro.mlir`) holds, sorted, without the
    module's frame (`func.func`, `func.return`) and constants; () without one, or when it
    does not parse."""
    if not bundle:
        return ()
    try:
        text = (Path(bundle) / "repro.mlir").read_text()
    except OSError:
        return ()
    from torch_mlir import ir

    from compiler.replay_runtime.mlir import new_context

    try:
        module = ir.Module.parse(text, new_context())
    except ir.MLIRError:
        return ()
    kinds: set[str] = set()

    def collect(op):
        name = op.name
        if name not in _FRAME and ".constant" not in name:
            kinds.add(name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    return tuple(sorted(kinds))


_FRAME = ("builtin.module", "func.func", "func.return")


def crash_site(repro: str | None) -> tuple[str | None, str | None]:
    """Where a crash's bundle crashes, as far as its program tells: (its last aten ops, those
    whose results no other aten op of the program takes, directly or through a list; the
    pass it crashes in, the last of its case's pipeline). (None, None) for no bundle, or one
    whose program has no aten op (a crash in `lower` or `execute`).

    A reduced crash keeps the op the pass crashes on and the ops that make what that op is
    given, so the whole op list tells one bug from another badly: seeds 93, 815, 953 and
    1413 crashed `torch-simplify-shape-calculations` on a `reshape` of a tensor of unknown
    rank that `amax` and `to`, `cosh`, `bitwise_xor` and `repeat`, or `to` made: four op
    lists, one bug, whose last op is `reshape` in each."""
    if not repro:
        return None, None
    try:
        case = json.loads((Path(repro) / "case.json").read_text())
        text = (Path(repro) / "repro.mlir").read_text()
    except (OSError, ValueError):
        return None, None
    pipeline = case.get("pipeline") or [None]
    sinks = last_aten_ops(text)
    return (", ".join(sinks) if sinks else None), pipeline[-1]


def last_aten_ops(text: str) -> list[str]:
    """The aten ops of a torch-level module whose results no other aten op takes (through
    any chain of other ops: a `prim.ListConstruct`, a cast), sorted; [] when it does not parse."""
    from torch_mlir import ir

    from compiler.replay_runtime.mlir import new_context

    try:
        module = ir.Module.parse(text, new_context())
    except ir.MLIRError:
        return []
    ops: list = []

    def collect(op):
        if op.name.startswith("torch.aten."):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)

    def reaches_aten(op) -> bool:
        seen, queue = set(), [op.operation]
        while queue:
            for result in queue.pop().results:
                for use in result.uses:
                    user = use.owner.operation
                    if user.name.startswith("torch.aten."):
                        return True
                    if user not in seen:
                        seen.add(user)
                        queue.append(user)
        return False

    return sorted({op.name for op in ops if not reaches_aten(op)})
