"""Delta debugging over the ops of an MLIR module.

A unit is one op of a function body, nested ones included (a block's terminator is
not). Removing an op replaces each of its used results with one of its own operands of
the same type (keeping the data flow connected) or else a new argument of the
enclosing function, then drops ops left without users. A candidate is
kept only when the predicate (`keeps`: "the failing pass still shows the same
signature") holds, so the reduction never drifts to another bug. The search is ddmin
with restart: chunks, then complements, then single ops, until no single removal
keeps the signature (1-minimal) or the deadline passes; the best so far is returned.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable, Sequence

from torch_mlir import ir
from torch_mlir.dialects import func as func_dialect

from compiler.replay_runtime.passes import SIGNATURE_ATTR
from compiler.replay_runtime.type_check import TORCH_RESULTS_ATTR, vtensor_parts
from compiler.stages import module_text, new_context, parse_module

# Literals: never a unit of their own. Removing a used one would make it a function argument
# (`!torch.int`, `!torch.list<int>`), which changes the code path a lowering takes (a `max.dim`
# whose `dim` is an argument is another program); an unused one goes with its last user.
LITERAL_OPS = frozenset(
    {
        "arith.constant",
        "torch.constant.int",
        "torch.constant.float",
        "torch.constant.bool",
        "torch.constant.none",
        "torch.constant.str",
        "torch.constant.device",
        "torch.constant.number",
        "torch.vtensor.literal",
        "tosa.const",
        "tosa.const_shape",
        "stablehlo.constant",
    }
)

# Ops that carry no behaviour of their own: a repro "about" them is about something else,
# so they are never named as the guilty op. The literals, and:
STRUCTURAL_OPS = LITERAL_OPS | frozenset(
    {
        "func.return",
        "torch.prim.ListConstruct",
        "tensor.empty",
        "linalg.yield",
        # plumbing: copies, casts and terminators between the ops that compute
        "torch.copy.to_tensor",
        "torch.copy.to_vtensor",
        "torch.tensor_static_info_cast",
        "torch.derefine",
        "torch.prim.If.yield",
        "torch.prim.Loop.condition",
        "torch.prim.TupleConstruct",
        "torch.prim.ListUnpack",
        "torch_c.to_builtin_tensor",
        "torch_c.from_builtin_tensor",
        "torch_c.to_i64",
        "torch_c.from_i64",
        "torch_c.to_f64",
        "torch_c.from_f64",
        "torch_c.to_i1",
        "torch_c.from_i1",
        "tensor.cast",
        "scf.yield",
        "bufferization.to_tensor",
        "bufferization.to_buffer",
        "bufferization.to_memref",
    }
)


def _functions(module: ir.Module) -> list:
    return [op for op in module.body.operations if op.operation.name == "func.func" and op.regions[0].blocks]


def _body_ops(function) -> list:
    block = function.regions[0].blocks[0]
    ops = list(block.operations)
    return ops[:-1] if ops and ops[-1].operation.name == "func.return" else ops


def _walk(operations: Iterable) -> Iterable:
    for op in operations:
        yield op.operation
        for region in op.operation.regions:
            for block in region.blocks:
                yield from _walk(block.operations)


def op_kinds(text: str) -> Counter:
    """How many ops of each kind the function bodies hold (nested ones included)."""
    module = parse_module(text, new_context())
    kinds: Counter = Counter()
    for function in _functions(module):
        for block in function.regions[0].blocks:
            kinds.update(op.name for op in _walk(block.operations))
    return kinds


def op_count(text: str) -> int:
    """The size of a reproducer: every op inside a function body (return included)."""
    return sum(op_kinds(text).values())


# Ops that hold others: named only when nothing inside them is.
CONTAINER_OPS = frozenset(
    {
        "linalg.generic",
        "linalg.map",
        "linalg.reduce",
        "scf.for",
        "scf.if",
        "scf.while",
        "scf.forall",
        "torch.prim.If",
        "torch.prim.Loop",
        "tm_tensor.scatter",
        "tm_tensor.sort",
    }
)


def behavioural_ops(text: str) -> list[str]:
    """The op kinds in `text` that are not mere plumbing (constants, return, ...), containers last."""
    kinds = [k for k in op_kinds(text) if k not in STRUCTURAL_OPS]
    inner = sorted(k for k in kinds if k not in CONTAINER_OPS)
    return inner or sorted(kinds)


def _nested_units(operations, whole: Collection[str]) -> Iterable:
    ops = list(operations)
    for op in ops[:-1] if ops else ():  # a block's last op is its terminator
        if op.operation.name in LITERAL_OPS:
            continue
        yield op
        if op.operation.name in whole:
            continue
        for region in op.operation.regions:
            for block in region.blocks:
                yield from _nested_units(block.operations, whole)


def _units(module: ir.Module, whole: Collection[str] = ()) -> list[tuple[int, object]]:
    """(index of the function, op) for every removable op, outer ops before nested ones;
    an op named in `whole` is removed whole or not at all (nothing inside it alone)."""
    return [
        (f, op)
        for f, function in enumerate(_functions(module))
        for op in _nested_units(function.regions[0].blocks[0].operations, whole)
    ]


def _set_function_type(function) -> None:
    entry = function.regions[0].blocks[0]
    old = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    inputs = [argument.type for argument in entry.arguments]
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(old.results)))
    if "arg_attrs" in function.attributes:  # attributes of the original arguments only
        attrs = list(ir.ArrayAttr(function.attributes["arg_attrs"]))
        attrs += [ir.DictAttr.get({})] * (len(inputs) - len(attrs))
        function.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs[: len(inputs)])


def _verified_text(module) -> str | None:
    """The candidate's text, or None when it does not verify."""
    try:
        if not module.operation.verify():
            return None
    except ir.MLIRError:
        return None
    return module_text(module)


def _erase_dead(function) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(_body_ops(function)):
            results = list(op.results)
            if results and all(not list(r.uses) for r in results):
                op.operation.erase()
                changed = True


def _bypass(op, result):
    """An operand of `op` that can stand for `result` (same type), results of ops first.

    Keeping the data flow connected keeps the ops upstream of the removed one alive.
    """
    same = [v for v in op.operands if v.type == result.type]
    same = [v for v in same if not _literal(v)] or same  # a computed value over a literal
    defined = [v for v in same if isinstance(v.owner, ir.Operation) or hasattr(v.owner, "name")]
    return (defined or same or [None])[-1]


def _torch_scalar(type_) -> bool:
    """A torch-dialect value that is not a tensor: `!torch.int`, `!torch.list<int>`,
    `!torch.bool`, `!torch.none`, ... A size, a dim, a flag: what a lowering branches on."""
    text = str(type_)
    return text.startswith("!torch.") and not text.startswith(("!torch.vtensor", "!torch.tensor"))


def _literal(value) -> bool:
    owner = value.owner
    return (
        isinstance(owner, ir.Operation)
        and owner.name in LITERAL_OPS
        or (hasattr(owner, "operation") and owner.operation.name in LITERAL_OPS)
    )


def _keeps_meaning(result, stand_in) -> bool:
    """Whether `stand_in` may take the place of a removed op's `result` without the program
    meaning another thing than the bug's: a torch scalar or list (a size, a dim, a flag)
    never stands in for another (`size(%x, 2)` is not its `%int2`), nor becomes an argument;
    a builtin scalar is not replaced by a literal (a size check's operand by the constant it
    is compared with)."""
    if _torch_scalar(result.type):
        return False
    is_tensor = str(result.type).startswith(("tensor<", "memref<", "!torch.vtensor", "!torch.tensor"))
    return is_tensor or stand_in is None or not _literal(stand_in)


def _bounds_arguments(function) -> bool:
    """Whether the function's arguments declare `torch.type_bound`s (the JIT frontends'
    `@main`: each `!torch.tensor` argument's shape and dtype, which the torch-backend
    pipeline's first pass, `torch-adjust-calling-conventions`, reads)."""
    if "arg_attrs" not in function.attributes:
        return False
    return any("torch.type_bound" in ir.DictAttr(attrs) for attrs in ir.ArrayAttr(function.attributes["arg_attrs"]))


def _never_an_argument(type_) -> bool:
    """A type no frontend gives a function's argument without a type bound: `!torch.tensor`
    (`!torch.tensor<[2],f32>`), which only a JIT frontend's `@main` takes, bound, and a
    value tensor of unknown shape and dtype, `!torch.vtensor` (after
    `torch-adjust-calling-conventions`, `@main` takes its bound's value tensors, cast to
    `!torch.vtensor` and copied to `!torch.tensor` for the ops)."""
    text = str(type_)
    return text.startswith("!torch.tensor") or text == "!torch.vtensor"


# On `@main` once `give_input_sizes` recorded its real inputs' sizes on the module
# (`SIGNATURE_ATTR`): its arguments are then fixed.
PINNED_INPUTS = "e2e.pinned_inputs"


def _fixed_arguments(function) -> bool:
    """Whether the function's arguments may not change: a JIT `@main`'s bound ones
    (`_bounds_arguments`), or a `@main` whose inputs' sizes are recorded (`PINNED_INPUTS`)."""
    return _bounds_arguments(function) or PINNED_INPUTS in function.attributes


def _stands_in(function, value_type, result_type) -> bool:
    """Whether a value of `value_type` (an operand of the removed op, or an argument) may take
    the place of the op's result: the same type, and, where `@main` runs on its real inputs'
    sizes (`PINNED_INPUTS`), a static one (a value of the same dynamic type may have other sizes
    at run time than the one it replaces: a `[1,?]` of `[1,2]` for one of `[1,8]`, and the
    program then fails a size check of its own)."""
    same = value_type == result_type
    return same and (PINNED_INPUTS not in function.attributes or "?" not in str(result_type))


def remove_ops(text: str, indices: Iterable[int], whole: Collection[str] = ()) -> str | None:
    """`text` without the units at `indices` (results become function arguments).

    A function whose arguments declare type bounds never gets a new argument, nor does any
    function get one of a type no frontend gives (`_never_an_argument`): it would have no
    bound, an input outside what the frontends give the torch-backend pipeline, on which
    its passes fail (or crash) otherwise, and the reduction would drift to that other
    failure under the same signature. Nor does a `@main` whose inputs' sizes are recorded
    (`_fixed_arguments`). An existing argument of the result's type stands in instead, or
    there is no candidate (None)."""
    context = new_context()
    module = parse_module(text, context)
    with context, ir.Location.unknown():
        units = _units(module, whole)
        functions = _functions(module)
        touched = set()
        for index in sorted(set(indices), reverse=True):
            owner, op = units[index]
            function = functions[owner]
            entry = function.regions[0].blocks[0]
            for result in op.results:
                if list(result.uses):
                    stand_in = _bypass(op, result) if _stands_in(function, result.type, result.type) else None
                    if not _keeps_meaning(result, stand_in):
                        return None  # a value made a literal or an argument: another program
                    if stand_in is None and (_fixed_arguments(function) or _never_an_argument(result.type)):
                        stand_in = next((a for a in entry.arguments if _stands_in(function, a.type, result.type)), None)
                        if stand_in is None:
                            return None  # no argument of its type, and a new one is not allowed
                    elif stand_in is None:
                        stand_in = entry.add_argument(result.type, ir.Location.unknown())
                    result.replace_all_uses_with(stand_in)
            op.operation.erase()
            touched.add(owner)
        for owner in touched:
            _erase_dead(functions[owner])
            _set_function_type(functions[owner])
        return _verified_text(module)


def drop_unused_arguments(text: str) -> str | None:
    context = new_context()
    module = parse_module(text, context)
    changed = False
    with context, ir.Location.unknown():
        for function in _functions(module):
            if PINNED_INPUTS in function.attributes:
                continue  # its recorded signature gives every argument its input
            entry = function.regions[0].blocks[0]
            for i in reversed(range(len(entry.arguments))):
                if not list(entry.arguments[i].uses):
                    entry.erase_argument(i)
                    changed = True
                    if "arg_attrs" in function.attributes:
                        attrs = list(ir.ArrayAttr(function.attributes["arg_attrs"]))
                        del attrs[i : i + 1]
                        function.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
            _set_function_type(function)
        if not changed:
            return None
        try:
            module.operation.verify()
        except ir.MLIRError:
            return None
        return module_text(module)


def _main_function(module: ir.Module):
    return next((f for f in _functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == "main"), None)


def result_count(text: str) -> int:
    """How many results `@main` returns (0 without a `@main`)."""
    main = _main_function(parse_module(text, new_context()))
    return 0 if main is None else len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)


def drop_result(text: str, index: int) -> str | None:
    """`text` with `@main`'s result `index` no longer returned (and the ops that only made it
    gone), its recorded signature (`SIGNATURE_ATTR`) too; None when it cannot be.

    A pass-through result (an argument returned as it is) or one the bug does not need is
    noise in a bundle: a maintainer reads every value the function returns."""
    context = new_context()
    module = parse_module(text, context)
    main = _main_function(module)
    if main is None:
        return None
    with context, ir.Location.unknown():
        block = main.regions[0].blocks[0]
        terminator = list(block.operations)[-1]
        if terminator.operation.name != "func.return" or index >= len(terminator.operands):
            return None
        kept = [v for i, v in enumerate(terminator.operands) if i != index]
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        results = [t for i, t in enumerate(function_type.results) if i != index]
        with ir.InsertionPoint(terminator):
            func_dialect.ReturnOp(kept)
        terminator.operation.erase()
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(function_type.inputs), results))
        if "res_attrs" in main.attributes:
            attrs = [a for i, a in enumerate(ir.ArrayAttr(main.attributes["res_attrs"])) if i != index]
            main.attributes["res_attrs"] = ir.ArrayAttr.get(attrs)
        if TORCH_RESULTS_ATTR in module.operation.attributes:
            expected = ir.StringAttr(module.operation.attributes[TORCH_RESULTS_ATTR]).value.split(";")
            del expected[index : index + 1]
            module.operation.attributes[TORCH_RESULTS_ATTR] = ir.StringAttr.get(";".join(expected))
        if SIGNATURE_ATTR in module.operation.attributes:
            recorded = ir.StringAttr(module.operation.attributes[SIGNATURE_ATTR]).value
            inputs, _, outputs = recorded.partition("->")
            outputs = _split_types(outputs.strip().removeprefix("(").removesuffix(")"))
            if index < len(outputs):
                del outputs[index]
            module.operation.attributes[SIGNATURE_ATTR] = ir.StringAttr.get(
                f"{inputs.strip()} -> ({', '.join(outputs)})"
            )
        _erase_dead(main)
        return _verified_text(module)


def _split_types(text: str) -> list[str]:
    """`tensor<2x3xf32>, tensor<?xi1>` -> its types (commas inside `<>` kept)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [p for p in [*parts, current.strip()] if p]


def _dims_and_element(type_) -> tuple[list[int | None], str] | None:
    """A ranked tensor's dims (None: dynamic) and element type, as a builtin `tensor<...>`
    or a torch value tensor `!torch.vtensor<[...],dtype>` declares them; None for another type."""
    try:
        declared = ir.RankedTensorType(type_)
    except ValueError:
        return vtensor_parts(str(type_))
    dims = [None if declared.is_dynamic_dim(i) else declared.get_dim_size(i) for i in range(declared.rank)]
    return dims, str(declared.element_type)


def _tensor_text(dims: Sequence[int | None], element: str) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in dims) + element + ">"


def give_input_sizes(text: str, shapes: list[list[int]]) -> str | None:
    """`text` with `@main`'s signature at the real inputs' sizes recorded on the module
    (`SIGNATURE_ATTR`, which `invoke_main` builds its made-up inputs from), where `@main` takes
    tensors of `shapes` (count, rank, static dims; builtin or torch value tensors) with some
    dim dynamic, and returns tensors; else None.

    A program compiled for dynamic dims checks their relations at run time (a dim that must be
    2 to broadcast against another): made-up sizes (3 each) fail those checks, and a crash on
    made-up inputs can then be a check the real inputs pass, not the pair's bug. The IR itself
    is not touched (static types would let the pipeline fold what it only checks at run time).
    `@main` is marked `PINNED_INPUTS`: its arguments are fixed (`remove_ops`)."""
    context = new_context()
    module = parse_module(text, context)
    main = next((f for f in _functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == "main"), None)
    if main is None:
        return None
    arguments = list(main.regions[0].blocks[0].arguments)
    if len(arguments) != len(shapes):
        return None
    inputs, dynamic = [], False
    for argument, shape in zip(arguments, shapes):
        declared = _dims_and_element(argument.type)
        if declared is None:
            return None
        dims, element = declared
        if len(dims) != len(shape) or any(d is not None and d != size for d, size in zip(dims, shape)):
            return None
        dynamic = dynamic or None in dims
        inputs.append(_tensor_text(shape, element))
    results = [
        _dims_and_element(t) for t in ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results
    ]
    if not dynamic or None in results:
        return None
    signature = f"({', '.join(inputs)}) -> ({', '.join(_tensor_text(*result) for result in results)})"
    with context, ir.Location.unknown():
        module.operation.attributes[SIGNATURE_ATTR] = ir.StringAttr.get(signature)
        main.attributes[PINNED_INPUTS] = ir.UnitAttr.get()
        return module_text(module)


@dataclass
class Reduction:
    text: str
    queries: int = 0
    seconds: float = 0.0
    minimal: bool = False  # no single removal (of an op, a result, an argument) keeps the signature
    ops_before: int = 0
    ops_after: int = 0
    log: list[str] = field(default_factory=list)


def reduce_ops(
    text: str,
    keeps: Callable[[str], bool],
    *,
    deadline: float,
    on_progress: Callable[[str], None] | None = None,
    whole: Collection[str] = (),
) -> Reduction:
    """ddmin over the ops of `text` while `keeps(candidate)`; returns the best so far. Ops
    named in `whole` are removed whole or kept whole (see `_units`)."""
    start = time.monotonic()
    seen: dict[str, bool] = {}
    reduction = Reduction(text, ops_before=op_count(text))

    def query(candidate: str | None) -> bool:
        if candidate is None:
            return False
        key = hashlib.sha1(candidate.encode()).hexdigest()
        if key not in seen:
            reduction.queries += 1
            seen[key] = keeps(candidate)
        return seen[key]

    def accept(candidate: str) -> None:
        reduction.text = candidate
        if on_progress:
            on_progress(candidate)

    while True:
        before = reduction.text
        _ddmin(reduction, query, accept, deadline, whole)
        if time.monotonic() >= deadline:
            reduction.minimal = False
            break
        for index in reversed(range(result_count(reduction.text))):
            if result_count(reduction.text) > 1 and query(candidate := drop_result(reduction.text, index)):
                accept(candidate)
        candidate = drop_unused_arguments(reduction.text)
        if query(candidate):
            accept(candidate)
        if reduction.text == before or time.monotonic() >= deadline:
            break
        reduction.minimal = False  # smaller again: its ops are searched again
    passed_on = None if reduction.minimal else drop_pass_through(reduction.text)
    if passed_on is not None and query(candidate := drop_unused_arguments(passed_on) or passed_on):
        accept(candidate)  # out of time: still one query for what a bundle never needs
    reduction.seconds = time.monotonic() - start
    reduction.ops_after = op_count(reduction.text)
    return reduction


def drop_pass_through(text: str) -> str | None:
    """`text` without the results `@main` returns as they came in (its arguments), the first
    result kept if all are; None when there are none."""
    module = parse_module(text, new_context())
    main = _main_function(module)
    if main is None:
        return None
    block = main.regions[0].blocks[0]
    *_, terminator = block.operations
    arguments = list(block.arguments)
    passing = [i for i, v in enumerate(terminator.operands) if any(v == a for a in arguments)]
    if len(passing) == len(list(terminator.operands)):
        passing = passing[1:]
    candidate = text
    for index in reversed(passing):
        candidate = drop_result(candidate, index) if candidate is not None else None
    return candidate if passing else None


def _ddmin(reduction, query, accept, deadline, whole) -> None:
    granularity = 2
    while time.monotonic() < deadline:
        count = len(_units(parse_module(reduction.text, new_context()), whole))
        if count == 0:
            reduction.minimal = True
            break
        granularity = min(granularity, count)
        chunks = [list(range(i * count // granularity, (i + 1) * count // granularity)) for i in range(granularity)]
        chunks = [c for c in chunks if c]
        everything = set(range(count))
        attempts = [sorted(everything - set(c)) for c in chunks] if granularity > 1 else []
        attempts += chunks
        for removed in attempts:
            if time.monotonic() >= deadline:
                break
            candidate = remove_ops(reduction.text, removed, whole)
            if query(candidate):
                accept(candidate)
                granularity = max(granularity - 1, 2)
                break
        else:
            if time.monotonic() >= deadline:
                break
            if granularity >= count:
                reduction.minimal = True
                break
            granularity = min(2 * granularity, count)
