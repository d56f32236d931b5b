"""Localize a failure: the smallest piece of the program that still shows it.

- compile failure: the pass that fails, and the IR just before it (the compiler's
  stage runner already did this; the saved IR is re-checked here);
- crash: the same, pass by pass in a forked child, so the crash is survived;
- numerical mismatch: `e2e.reducer.graph` (the smallest group of FX nodes that
  miscompiles, given golden inputs).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from compiler.replay_runtime.crash import report_native_crashes
from compiler.stages import contract_steps, new_context
from e2e.framework import isolation
from e2e.framework.signature import Signature, crash_signature, ended_signature, guilty_op
from e2e.reducer.case import CRASH, ERROR, HANG, Case, compile_signature, expand, observe, single_threaded


def stage_pipelines(config) -> dict[str, list[str]]:
    """Stage -> pipeline from that stage's input IR to LLVM, as the config itself says.

    A config describes its compiler with `toolchain()` (`compiler.toolchain.Toolchain`),
    so an ltc or torchscript failure replays with its own pipelines.
    """
    describe = getattr(config, "toolchain", None)
    if not callable(describe):
        raise TypeError(
            f"config {getattr(config, 'name', config)!r} has no toolchain(): the reducer cannot replay its "
            "stages (add `def toolchain(self) -> compiler.toolchain.Toolchain`)"
        )
    return {stage: list(p) for stage, p in describe().stages.items()}


def stage_pipeline(config, stage: str, stage_input: str) -> list[str]:
    """The rest of the compile from `stage`'s saved input (its snapshot)."""
    return stage_pipelines(config)[stage]


# A reduced candidate "still hangs" when its one pass gives no result in this many seconds.
HANG_SECONDS = 10.0


@dataclass
class Localized:
    case: Case
    ir: str  # the IR just before the failing pass (or of the failing node)
    diagnostics: list[str]


def parses(text: str) -> bool:
    try:
        from compiler.stages import parse_module

        parse_module(text, new_context())
        return True
    except Exception:
        return False


# The signature of a pass that raised and then ran clean on its input alone (its text is empty).
NONE_SEEN = Signature("")


def localize_error(
    text: str, pipeline: Sequence[str], stage: str, signature: Signature | None = None
) -> Localized | None:
    """Run `pipeline` pass by pass in this process; the first failing pass and its input."""
    from compiler.stages import module_text, parse_module
    from e2e.reducer.case import run_entries

    context = new_context()
    module = parse_module(text, context)
    passes = expand(pipeline, context)
    for i, entry in enumerate(passes):
        before = module_text(module)
        try:
            run_entries(module, [entry])
        except Exception:
            observed, diagnostics = compile_signature(before, stage, [entry], entry)
            if not parses(before):  # e.g. torch_c ops, unparsable outside a pipeline
                observed, diagnostics = compile_signature(text, stage, passes[: i + 1], entry)
                case = Case(ERROR, stage, passes[: i + 1], observed or NONE_SEEN, guilty_op(diagnostics))
                return Localized(case, text, diagnostics)
            case = Case(ERROR, stage, [entry], observed or NONE_SEEN, guilty_op(diagnostics))
            return Localized(case, before, diagnostics)
    return None


def localize_crash(
    text: str, pipeline: Sequence[str], stage: str, timeout: float = 120, *, hang: bool = False
) -> Localized | None:
    """Run `pipeline` pass by pass in a forked child; the pass it died in and that pass's input.

    With `hang`, the pass it was still in after `timeout` seconds (a hang case whose queries
    get `HANG_SECONDS` each)."""
    scratch = Path(tempfile.mkdtemp(prefix="e2e-localize-"))
    try:

        def child() -> None:
            single_threaded()
            report_native_crashes(frames=stage != "execute")  # a compile stage's crash: frames name the pass, op
            from compiler.stages import module_text, parse_module, write_atomic
            from e2e.reducer.case import run_entries

            context = new_context()
            module = parse_module(text, context)
            for i, entry in enumerate(expand(pipeline, context)):
                write_atomic(scratch / "before.mlir", module_text(module))
                write_atomic(scratch / "pass", f"{i}\n{entry}")
                run_entries(module, [entry])

        outcome = isolation.run_forked(child, timeout)
        ended = isolation.TimedOut if hang else isolation.Crashed
        if not isinstance(outcome, ended) or not (scratch / "pass").exists():
            return None
        _, entry = (scratch / "pass").read_text().split("\n", 1)
        before = (scratch / "before.mlir").read_text()
        if hang:
            signature = ended_signature("timeout", stage)
            localized = Localized(Case(HANG, stage, [entry], signature, hang_seconds=HANG_SECONDS), before, [])
        else:
            signature = crash_signature(stage, outcome.stderr_tail, outcome.reason)
            localized = Localized(Case(CRASH, stage, [entry], signature), before, [outcome.stderr_tail])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _ended_inside_contract(localized, timeout) or localized


# torch-mlir's abstract interpretation inside the simplification pipeline: a reify pass wraps
# each op in a calculation region (its shape or dtype function, inlined), simplify passes
# fold it, a drop pass unwraps it again.
_CALCULATION_OPENS, _CALCULATION_CLOSES = "torch-reify-", "torch-drop-abstract-interp-calculations"


def _ended_inside_contract(localized: Localized, timeout: float) -> Localized | None:
    """A crash or hang in torch-mlir's `torch-lower-to-backend-contract`, replayed step by
    step: the pass of its simplification pipeline it dies (or hangs) in, at the iteration it
    does, and that pass's input. None for another pass, or when the replay does not end the
    same way (the crash is the contract pass's own, or needs the whole pass).

    Each query of the reduction then runs that one pass, not the whole contract pass: a
    candidate that no longer crashes iterates the contract pass to its limit and then fails
    its check, 1-2 s a query where one pass takes milliseconds; and the bundle names the pass
    (`Gen_998` of the campaigns hangs in `torch-decompose-complex-ops`). A crash while the ops are
    wrapped in their shape or dtype calculations starts where they were wrapped (the reify
    pass's input, that pass through the one that crashes): the module then holds the program's
    ops, not every op of their inlined shape functions, and the bundle runs the passes a
    torch-mlir developer reproduces it with."""
    case = localized.case
    steps = contract_steps(case.pipeline[0], new_context()) if len(case.pipeline) == 1 else None
    if steps is None:
        return None
    passes, max_iterations = steps
    scratch = Path(tempfile.mkdtemp(prefix="e2e-localize-contract-"))
    try:

        def child() -> None:
            single_threaded()
            report_native_crashes()  # a compile stage's crash: its frames name the pass and op
            from compiler.stages import module_text, parse_module, write_atomic
            from e2e.reducer.case import run_entries

            module = parse_module(localized.ir, new_context())
            for _ in range(max_iterations):
                start = module_text(module)
                for index, inner in enumerate(passes):
                    write_atomic(scratch / "before.mlir", module_text(module))
                    write_atomic(scratch / "pass", str(index))
                    if inner.startswith(_CALCULATION_OPENS):
                        write_atomic(scratch / "opened.mlir", module_text(module))
                        write_atomic(scratch / "opened", str(index))
                    run_entries(module, [inner])
                    if _CALCULATION_CLOSES in inner:
                        (scratch / "opened").unlink(missing_ok=True)
                if module_text(module) == start:
                    return  # a fixed point: the contract pass would go no further

        outcome = isolation.run_forked(child, timeout)
        ended = isolation.TimedOut if case.kind == HANG else isolation.Crashed
        if not isinstance(outcome, ended) or not (scratch / "pass").exists():
            return None
        if case.kind != HANG and crash_signature(case.stage, outcome.stderr_tail, outcome.reason) != case.signature:
            return None
        index = int((scratch / "pass").read_text())
        diagnostics = localized.diagnostics if case.kind == HANG else [outcome.stderr_tail]
        if (scratch / "opened").exists():
            opened = int((scratch / "opened").read_text())
            wrapped = replace(case, pipeline=passes[opened : index + 1])
            ir = (scratch / "opened.mlir").read_text()
            if observe(wrapped, ir, timeout=timeout) == case.signature:
                return Localized(wrapped, ir, diagnostics)
        before = (scratch / "before.mlir").read_text()
        inner = replace(case, pipeline=[passes[index]])
        if case.kind == HANG and observe(inner, before) != case.signature:
            return None  # slow over many passes, not one pass that hangs: the contract pass it is
        return Localized(inner, before, diagnostics)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
