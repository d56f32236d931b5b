"""Which op of a reduced program a crash is about: the op its native frames name, or the op
whose lowering emitted the runtime check that failed.

A reduced crash keeps the op that crashes and the ops that make its operands, so the op
list names the symptom badly (`minimum, pow, to.dtype, where` for an `aten.view` lowering's
wrong check). The crash state says more (`e2e.framework.signature.crash_state`): a pass
that segfaults in `AtenAnyDimsOp::fold` is about `torch.aten.any.dims`; an abort on a failed
`cf.assert` is about the op whose lowering wrote that assert, which the lowered IR's
locations tell when each torch op is given a name first.
"""

from __future__ import annotations

import re
from typing import Sequence

from torch_mlir import ir

from compiler.replay_runtime.mlir import new_context, parse_module
from compiler.replay_runtime.pipeline import PYTHON_PASS, run_entries
from e2e.reducer.reduce import behavioural_ops, op_kinds

# `mlir::torch::Torch::AtenAnyDimsOp::fold`, `mlir::tosa::TransposeOp::verify`: an op's C++ class.
_OP_CLASS = re.compile(r"(?:(\w+)::)?(\w+)Op(?:Generic)?(?:Adaptor)?\b")


def _squashed(name: str) -> str:
    return re.sub(r"[._]", "", name).lower()


def op_in_frames(crash_state: str, text: str) -> str | None:
    """The op of `text` whose C++ class the crash state's frames name, innermost first:
    `AtenAnyDimsOp` is `torch.aten.any.dims` (its name without dialect prefix and dots)."""
    _, _, frames = crash_state.partition(" in ")
    kinds = [k for k in op_kinds(text) if "." in k]
    for match in _OP_CLASS.finditer(frames):
        namespace, cls = (match[1] or "").lower(), _squashed(match[2])
        for kind in kinds:
            dialect, _, rest = kind.partition(".")  # torch.aten.any.dims: `AtenAnyDimsOp`, any namespace
            if _squashed(rest) == cls and (dialect == "torch" or namespace in ("", dialect)):
                return kind
    return None


def _tagged(text: str) -> tuple[ir.Module, dict[str, str]] | None:
    """`text` parsed with each torch, TOSA or StableHLO op given a location of its own
    (`e2e_op_<n>`), and which op each name is: ops a pass creates from one carry its location."""
    context = new_context()
    try:
        module = parse_module(text, context)
    except ir.MLIRError:
        return None
    names: dict[str, str] = {}
    with context:

        def tag(op):
            if op.name.startswith(("torch.aten.", "tosa.", "stablehlo.")):
                label = f"e2e_op_{len(names)}"
                names[label] = op.name
                op.location = ir.Location.name(label)
            return ir.WalkResult.ADVANCE

        module.operation.walk(tag)
    return module, names


def lowered_from(text: str, stage: str, pipeline: Sequence[str]) -> str | None:
    """The op of `text` a pass's diagnostic is about when it names an op the pass created
    (`'linalg.pooling_nchw_sum' op expected operand #0 rank (3)...` while lowering
    `torch.aten.avg_pool2d`): the op whose location the diagnostic carries."""
    from compiler.replay_runtime.replay import compile_signature

    tagged = _tagged(text)
    if tagged is None:
        return None
    module, names = tagged
    _, diagnostics = compile_signature(module.operation.get_asm(enable_debug_info=True), stage, pipeline, pipeline[-1])
    for diagnostic in diagnostics[:1]:
        label = re.search(r'loc\("(e2e_op_\d+)"\)', diagnostic)
        if label:
            return names[label[1]]
    return None


# How a failed `cf.assert`'s message shows in a crash state: `Fatal Python error: Aborted: <message>`.
_ABORT_WORDS = re.compile(r"Aborted: (.*?)(?: in \S+::|$)")


def asserting_op(crash_state: str, text: str, pipeline: Sequence[str]) -> str | None:
    """The torch op of `text` whose lowering wrote the `cf.assert` whose message the crash
    state quotes: each op named by a location first, the pipeline run entry by entry until
    such an assert appears, its location read. None when none does."""
    match = _ABORT_WORDS.search(crash_state)
    if not match:
        return None
    message = match[1].strip()
    tagged = _tagged(text)
    if tagged is None:
        return None
    module, names = tagged
    for entry in pipeline:
        if entry.startswith(PYTHON_PASS) or "llvm" in entry:
            break
        try:
            run_entries(module, [entry])
        except Exception:  # noqa: BLE001 - a pass that fails here tells nothing of the assert
            return None
        printed = module.operation.get_asm(enable_debug_info=True)
        if "cf.assert" not in printed:
            continue
        aliases = dict(re.findall(r"^(#loc\d*) = loc\((.*)\)$", printed, re.M))
        for line in printed.splitlines():
            if "cf.assert" in line and f'"{message}"' in line:
                loc = re.search(r"loc\((#loc\d*|\"[^\"]*\")\)\s*$", line)
                where = loc[1] if loc else ""
                where = aliases.get(where, where)
                label = re.search(r"e2e_op_\d+", where)
                if label:
                    return names[label[0]]
        return None
    return None


def vanished_op(text: str, entry: str) -> str | None:
    """The one op kind of `text` (not mere plumbing) that pass `entry` makes disappear, run
    without the verifier: the op a fold replaced by a value of another type (the verifier then
    blames the `func.return` that returns it)."""
    from torch_mlir import passmanager

    from compiler.replay_runtime.pipeline import as_text

    module = parse_module(text, new_context())
    try:
        with module.context:
            manager = passmanager.PassManager.parse(as_text([entry]))
            manager.enable_verifier(False)
            manager.run(module.operation)
        after = set(op_kinds(module.operation.get_asm(assume_verified=True)))
    except Exception:  # noqa: BLE001 - the step fails on it: nothing vanished to name
        return None
    vanished = [kind for kind in behavioural_ops(text) if kind not in after]
    return vanished[0] if len(vanished) == 1 else None
