"""Where did the torch dialect's types first stop agreeing with what its ops compute?

    broke = where_types_broke(input_ir, passes)      # the first pass after which one lies

The check itself (`first_disagreement`: every `torch.aten` op's declared result shape
against torch's meta kernel on its declared operand types) is part of the replay runtime
(`compiler.replay_runtime.type_check`), so a bundle can run it. A shape function that gets
broadcasting wrong, or a fold that replaces a value by one of another shape, leaves IR that
verifies, and a later pass reports the damage: a bundle of that failure names the pass
that tripped over the types. `where_types_broke` replays a pipeline pass by pass and names
the step that broke them, with the module it was given, so a second bundle can start
where the types still agreed (`TypesBroke.replay_pipeline`).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from torch_mlir import ir, passmanager

from compiler.pipelines import as_text
from compiler.replay_runtime.mlir import new_context, parse_module
from compiler.replay_runtime.type_check import (
    Disagreement,
    first_disagreement,
    first_with_op,
    functions,
)
from compiler.stages import CONTRACT_PASS, contract_steps, expand, run_pipeline

__all__ = ["Disagreement", "TYPES_AGREE", "TypesBroke", "first_disagreement", "where_types_broke"]

# The check as a Python pass of a pipeline: fails when an op's types disagree.
TYPES_AGREE = "python:compiler.replay_runtime.type_check:types_agree"


@dataclass(frozen=True)
class TypesBroke:
    """The first pass after which an op's types disagree (its input agreed)."""

    pass_entry: str  # the step as named to people (inside the contract pass: its iteration too)
    disagreement: Disagreement
    input_ir: str = ""  # the module the step was given, whose types agree
    step: str = ""  # the pass entry that breaks them when run alone on `input_ir`

    def describe(self) -> str:
        return f"types first disagree after {self.pass_entry}: {self.disagreement.describe()}"

    def replay_pipeline(self) -> list[str]:
        """What shows the break on `input_ir`: the type check (which the input passes),
        the step, the type check again (which fails). A step whose output does not verify
        (a function returns a value of another type than it declares) fails itself."""
        check_after = [] if self.disagreement.replaced_in is not None else [TYPES_AGREE]
        return [TYPES_AGREE, self.step, *check_after]


def where_types_broke(input_ir: str, pipeline: Sequence[str], seconds: float = 30.0) -> TypesBroke | None:
    """Run `pipeline` on `input_ir` pass by pass, checking the types after each: the first
    pass after which an op's types disagree, when its input agreed; None when the input
    already disagreed, no pass broke them, or a pass failed first. Inside torch-mlir's
    `torch-lower-to-backend-contract` (one pass that iterates a simplification pipeline:
    decompositions, shape and dtype refinement, canonicalization) the step is looked for
    in that pipeline's passes, iterated as the contract pass does. Gives up (None) after
    `seconds`."""
    deadline = time.monotonic() + seconds
    context = new_context()
    module = parse_module(input_ir, context)
    if first_disagreement(module) is not None:
        return None
    for pass_entry in expand(pipeline, context):
        if time.monotonic() > deadline:
            return None
        before = module.operation.clone()
        try:
            run_pipeline(module, [pass_entry])
        except ir.MLIRError as error:
            return _replaced_return(before, pass_entry, context) if _RETURN_MISMATCH in str(error) else None
        op, found = first_with_op(module)
        if found is not None:
            inner = (
                _inside_contract(before, pass_entry, context, deadline)
                if pass_entry.startswith(CONTRACT_PASS)
                else None
            )
            named = (
                _replaced_operand(before, module, op, found) or _removed_upstream(before, module, op, found) or found
            )
            return inner or TypesBroke(pass_entry, named, _text(before), pass_entry)
    return None


def _replaced_operand(before: ir.Operation, after: ir.Module, op, found: Disagreement) -> Disagreement | None:
    """When the pass handed the disagreeing op another value than it had (a fold or a rewrite
    of the op that made it, replacing its result by one of another type): that op, named.
    The op is found before the pass as the same kind with the same result types, counted
    in program order."""

    def same_kind(candidate) -> bool:
        return candidate.operation.name == op.operation.name and [str(r.type) for r in candidate.operation.results] == [
            str(r.type) for r in op.operation.results
        ]

    later = [candidate.operation for candidate in _all_ops(after) if same_kind(candidate)]
    ordinal = later.index(op.operation)
    earlier = [candidate for candidate in _all_ops(before) if same_kind(candidate)]
    if ordinal >= len(earlier):
        return None
    for was, now in zip(earlier[ordinal].operation.operands, op.operation.operands):
        if str(was.type) != str(now.type) and not isinstance(was.owner, ir.Block):
            maker = was.owner.operation
            return Disagreement(maker.name, str(maker).strip(), str(was.type), str(now.type), user=found)
    return None


def _removed_upstream(before: ir.Operation, after: ir.Module, op, found: Disagreement) -> Disagreement | None:
    """When the pass removed an aten op upstream of the disagreeing one (a fold or rewrite of
    it: the ops downstream then compute from another value than they did), the nearest such
    op, named. Upstream is followed from the disagreeing op's counterpart before the pass
    (the same kind, counted in program order) through its operands' makers."""
    kinds_after = Counter(candidate.operation.name for candidate in _all_ops(after))
    earlier_ops = _all_ops(before)
    kinds_before = Counter(candidate.operation.name for candidate in earlier_ops)
    gone = {
        kind for kind, count in kinds_before.items() if kind.startswith("torch.aten.") and kinds_after[kind] < count
    }
    same = [candidate.operation for candidate in _all_ops(after) if candidate.operation.name == op.operation.name]
    earlier = [candidate.operation for candidate in earlier_ops if candidate.operation.name == op.operation.name]
    if not gone or op.operation not in same or same.index(op.operation) >= len(earlier):
        return None
    frontier, seen, visited = [earlier[same.index(op.operation)]], set(), []
    while frontier:
        current = frontier.pop(0)
        for value in current.operands:
            if isinstance(value.owner, ir.Block):
                continue
            maker = value.owner.operation
            if maker.name in gone:
                return Disagreement(maker.name, str(maker).strip(), str(value.type), "", user=found, removed=True)
            if id(maker) not in seen:  # every maker stays in `visited`: no id is reused
                seen.add(id(maker))
                visited.append(maker)
                frontier.append(maker)
    return None


def _all_ops(module: ir.Module | ir.Operation) -> list:
    return [op for function in functions(module) for op in function.regions[0].blocks[0].operations]


_RETURN_MISMATCH = "doesn't match function result type"


def _inside_contract(before: ir.Operation, pass_entry: str, context: ir.Context, deadline: float) -> TypesBroke | None:
    """The step of the contract pass's simplification pipeline after which types first
    disagree (each iteration pass by pass, up to its `max-iterations` or a fixed point),
    named `<contract pass> > iteration N: <pass>`; None when the replay does not show it."""
    steps = contract_steps(pass_entry, context)
    if steps is None:
        return None
    passes, max_iterations = steps
    module = parse_module(before.get_asm(enable_debug_info=False), context)
    for iteration in range(1, max_iterations + 1):
        start = str(module)
        for inner in passes:
            if time.monotonic() > deadline:
                return None
            before_inner = module.operation.clone()
            try:
                run_pipeline(module, [inner])
            except ir.MLIRError:
                return None
            found = first_disagreement(module)
            if found is not None:
                return TypesBroke(
                    f"{CONTRACT_PASS} > iteration {iteration}: {inner}", found, _text(before_inner), inner
                )
        if str(module) == start:
            return None
    return None


def _replaced_return(before: ir.Operation, pass_entry: str, context: ir.Context) -> TypesBroke | None:
    """A pass whose output fails to verify because a function returns a value of another
    type than it declares: the pass is run again without the verifier, and the op whose
    result it replaced (a fold or a rewrite of that op) is named."""
    if pass_entry.startswith("python:"):
        return None
    module = parse_module(before.get_asm(enable_debug_info=False), context)  # `before` stays as it was
    try:
        with context:
            manager = passmanager.PassManager.parse(as_text([pass_entry]))
            manager.enable_verifier(False)
            manager.run(module.operation)
    except ir.MLIRError:
        return None
    for old, new in zip(functions(before), functions(module)):
        declared = ir.FunctionType(ir.TypeAttr(new.attributes["function_type"]).value).results
        for index, (was, now) in enumerate(zip(_return_operands(old), _return_operands(new))):
            if str(now.type) == str(declared[index]) or isinstance(was.owner, ir.Block):
                continue
            replaced = was.owner.operation.name
            found = Disagreement(
                replaced,
                str(was.owner.operation).strip(),
                str(declared[index]),
                str(now.type),
                replaced_in=ir.StringAttr(new.attributes["sym_name"]).value,
            )
            return TypesBroke(pass_entry, found, _text(before), pass_entry)
    return None


def _return_operands(function) -> list:
    *_, terminator = function.regions[0].blocks[0].operations
    return list(terminator.operation.operands) if terminator.operation.name == "func.return" else []


def _text(operation: ir.Operation) -> str:
    return operation.get_asm(enable_debug_info=False)
