"""Do the torch dialect's result types agree with what the ops compute from their operands?

    disagreement = first_disagreement(module)       # None, or the first op whose types lie
    broke = where_types_broke(input_ir, passes)      # the first pass after which one lies

A torch-dialect op carries its result type (`!torch.vtensor<[2,3],f32>`); nothing checks
it against its operands. A shape function that gets broadcasting wrong, or a fold that
replaces a value by one of another shape, leaves IR that verifies, and a later pass
reports the damage (a `tensor.cast` that cannot cast, a wrong result): a bundle then names
the pass that tripped over the types, not the step that broke them.

This module checks each `torch.aten.*` op alone, as torch would run it: every tensor
operand a meta tensor of its declared type (a dynamic dim given a sample size), every
scalar and list operand its constant; torch's own meta kernel gives the result's shape,
which must agree with the declared rank and static dims (dtypes are not judged). An op whose
operands are not all known (a scalar computed at run time), that torch does not know, or
whose meta kernel raises is not judged, unless every operand shape is static and the
kernel says they do not fit the op (a disagreement too). A dim that changes with the
sample size is not judged either.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch_mlir import ir, passmanager

from compiler.pipelines import as_text
from compiler.replay_runtime.mlir import new_context, parse_module
from compiler.stages import expand, run_pipeline

# MLIR element types of !torch.vtensor -> torch dtypes.
_DTYPES = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "si64": torch.int64,
    "si32": torch.int32,
    "si16": torch.int16,
    "si8": torch.int8,
    "ui8": torch.uint8,
    "i1": torch.bool,
    "complex<f32>": torch.complex64,
    "complex<f64>": torch.complex128,
}
# c10::ScalarType codes, as the torch dialect passes a dtype (an !torch.int operand).
_SCALAR_TYPES = {
    0: torch.uint8,
    1: torch.int8,
    2: torch.int16,
    3: torch.int32,
    4: torch.int64,
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    9: torch.complex64,
    10: torch.complex128,
    11: torch.bool,
    15: torch.bfloat16,
}
_VTENSOR = re.compile(r"^!torch\.vtensor<\[([^\]]*)\],(.+)>$")
SAMPLE_SIZES = (5, 7)  # what a dynamic dim is taken to be; a dim that follows it is not judged


@dataclass(frozen=True)
class Disagreement:
    """An op whose declared result type is not what its operands give."""

    op: str  # e.g. torch.aten.div.Tensor
    line: str  # the op as printed
    declared: str  # the declared result type
    computed: str  # the shape torch's meta kernel gives, in the same form (its dtype the declared one)
    replaced_in: str | None = None  # the function whose return took a value of another type in its place
    user: Disagreement | None = None  # the op that took the replacing value, and how it disagrees
    refused: str | None = None  # torch's meta kernel refuses the declared (static) operand types: its message

    def describe(self) -> str:
        if self.replaced_in is not None:
            return (
                f"{self.op}'s result ({self.declared}) was replaced by a value of type {self.computed}, which "
                f"@{self.replaced_in} returns (a fold or rewrite of {self.op})"
            )
        if self.user is not None:
            return (
                f"{self.op}'s result ({self.declared}) was replaced by a value of type {self.computed} (a fold "
                f"or rewrite of {self.op}), which {self.user.op} takes: {self.user.describe()}"
            )
        if self.refused is not None:
            return f"{self.op} declares {self.declared} of operands torch refuses ({self.refused})"
        return f"{self.op} declares {self.declared}, its operands give {self.computed}"


@dataclass(frozen=True)
class TypesBroke:
    """The first pass after which an op's types disagree (its input agreed)."""

    pass_entry: str
    disagreement: Disagreement

    def describe(self) -> str:
        return f"types first disagree after {self.pass_entry}: {self.disagreement.describe()}"


def _vtensor(type_text: str) -> tuple[list[int | None], torch.dtype] | None:
    match = _VTENSOR.match(type_text)
    if match is None or match[2] not in _DTYPES:
        return None
    dims = [None if d == "?" else int(d) for d in match[1].split(",")] if match[1] else []
    return dims, _DTYPES[match[2]]


def _format(dims: Sequence[int | None], dtype: torch.dtype) -> str:
    element = next(name for name, known in _DTYPES.items() if known == dtype)
    return f"!torch.vtensor<[{','.join('?' if d is None else str(d) for d in dims)}],{element}>"


def _constant(op: ir.OpView) -> Any:
    name, attributes = op.operation.name, op.operation.attributes
    if name == "torch.constant.none":
        return None
    value = attributes["value"]
    if name == "torch.constant.int":
        return ir.IntegerAttr(value).value
    if name == "torch.constant.float":
        return ir.FloatAttr(value).value
    if name == "torch.constant.bool":
        return ir.BoolAttr(value).value
    return ir.StringAttr(value).value  # torch.constant.str, torch.constant.device


_UNKNOWN = object()


def _aten_overload(name: str):
    """torch.ops.aten.<op>.<overload> of a torch dialect op name, or None."""
    parts = name.split(".")
    if len(parts) < 3 or parts[:2] != ["torch", "aten"] or parts[2].endswith("_"):
        return None  # not aten, or in place
    packet = getattr(torch.ops.aten, parts[2], None)
    overload = ".".join(parts[3:]) or "default"
    return getattr(packet, overload, None) if packet is not None else None


def _arguments(overload, operands: list[Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """The call's positional and keyword arguments, by the schema (dtype codes as dtypes,
    devices as meta); None where the operands do not fit it."""
    schema = overload._schema.arguments
    if len(operands) != len(schema):
        return None
    args, kwargs = [], {}
    for argument, value in zip(schema, operands):
        kind = str(argument.type)
        if "ScalarType" in kind and isinstance(value, int):
            value = _SCALAR_TYPES.get(value, _UNKNOWN)
        elif "Device" in kind and value is not None:
            value = "meta"
        elif ("Layout" in kind or "MemoryFormat" in kind) and value is not None:
            value = None
        if value is _UNKNOWN:
            return None
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return args, kwargs


@dataclass(frozen=True)
class _Refused:
    message: str


# What torch's meta kernels say when operand shapes do not fit an op (and not when a meta
# kernel is missing, or an op's result depends on values).
_SHAPE_ERROR = re.compile(r"size|shape|dimension|broadcast|match", re.I)
_NOT_JUDGED = re.compile(r"meta|not ?implemented|data.dependent", re.I)


def _computed(overload, operands: list[Any], static: bool) -> list[tuple[list[int], torch.dtype]] | _Refused | None:
    call = _arguments(overload, operands)
    if call is None:
        return None
    try:
        outputs = overload(*call[0], **call[1])
    except Exception as error:  # noqa: BLE001 - torch's meta kernel does not take it: not judged, unless
        # every operand shape is static and the kernel says they do not fit the op.
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if static and isinstance(error, (RuntimeError, ValueError, IndexError)):
            if _SHAPE_ERROR.search(message) and not _NOT_JUDGED.search(message):
                return _Refused(message[:200])
        return None
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    if not all(isinstance(out, torch.Tensor) for out in outputs):
        return None
    return [(list(out.shape), out.dtype) for out in outputs]


def _judge_op(op: ir.OpView, values: dict, sample: int) -> list[tuple[list[int], torch.dtype]] | _Refused | None:
    overload = _aten_overload(op.operation.name)
    if overload is None:
        return None
    operands = [values.get(value, _UNKNOWN) for value in op.operation.operands]
    if any(operand is _UNKNOWN for operand in operands):
        return None
    static = all(None not in meta.dims for meta in _metas(operands))
    operands = [_materialize(operand, sample) for operand in operands]
    return _computed(overload, operands, static)


def _metas(operands: list[Any]) -> list[_Meta]:
    """The tensor operands, lists' included."""
    found = []
    for operand in operands:
        found += _metas(operand) if isinstance(operand, list) else [operand] if isinstance(operand, _Meta) else []
    return found


def _materialize(operand: Any, sample: int) -> Any:
    if isinstance(operand, _Meta):
        return torch.empty([sample if d is None else d for d in operand.dims], dtype=operand.dtype, device="meta")
    if isinstance(operand, list):
        return [_materialize(item, sample) for item in operand]
    return operand


@dataclass(frozen=True)
class _Meta:
    dims: tuple[int | None, ...]
    dtype: torch.dtype


def _known(op: ir.OpView, values: dict) -> None:
    """Record what the op's results are known to be: a constant, a list of known values,
    or a tensor of its declared type."""
    name = op.operation.name
    results = op.operation.results
    if name.startswith("torch.constant.") and len(results) == 1:
        try:
            values[results[0]] = _constant(op)
        except (KeyError, ValueError):
            pass
        return
    if name == "torch.prim.ListConstruct" and len(results) == 1:
        items = [values.get(value, _UNKNOWN) for value in op.operation.operands]
        if all(item is not _UNKNOWN for item in items):
            values[results[0]] = items
        return
    for result in results:
        declared = _vtensor(str(result.type))
        if declared is not None:
            values[result] = _Meta(tuple(declared[0]), declared[1])


def _disagrees(declared: tuple[list[int | None], torch.dtype], computed: list) -> bool:
    """Whether every sample size gives the same rank or static dim, and it is not the
    declared one. Dtypes are not judged: torch-mlir's decompositions type some ops on
    purpose otherwise than torch would (an integer `div.Tensor` inside `fmod`'s)."""
    dims = declared[0]
    first = computed[0]
    if any(len(c[0]) != len(first[0]) for c in computed):
        return False  # follows the sample: not judged
    if len(first[0]) != len(dims):
        return True
    for index, dim in enumerate(dims):
        sizes = {c[0][index] for c in computed}
        if dim is not None and len(sizes) == 1 and sizes != {dim}:
            return True
    return False


def first_disagreement(module: ir.Module) -> Disagreement | None:
    """The first torch.aten op (in program order) whose declared result types are not what
    torch computes from its declared operand types, or whose static operand types torch
    refuses."""
    return _first(module)[1]


def _first(module: ir.Module) -> tuple[Any, Disagreement | None]:
    """`first_disagreement`, with the op."""
    values: dict = {}
    for function in _functions(module):
        for argument in function.regions[0].blocks[0].arguments:
            declared = _vtensor(str(argument.type))
            if declared is not None:
                values[argument] = _Meta(tuple(declared[0]), declared[1])
        for op in function.regions[0].blocks[0].operations:
            _known(op, values)
            declared = [_vtensor(str(result.type)) for result in op.operation.results]
            if not declared or any(d is None for d in declared):
                continue
            computed = [_judge_op(op, values, sample) for sample in SAMPLE_SIZES]
            if all(isinstance(c, _Refused) for c in computed):
                line = str(op.operation).strip()
                return op, Disagreement(op.operation.name, line, _format(*declared[0]), "", refused=computed[0].message)
            if any(c is None or isinstance(c, _Refused) or len(c) != len(declared) for c in computed):
                continue
            for index, expected in enumerate(declared):
                outcomes = [c[index] for c in computed]
                if _disagrees(expected, outcomes):
                    dims = [
                        None if len({o[0][d] for o in outcomes}) > 1 else outcomes[0][0][d]
                        for d in range(len(outcomes[0][0]))
                    ]
                    return op, Disagreement(
                        op.operation.name,
                        str(op.operation).strip(),
                        _format(*expected),
                        _format(dims, expected[1]),
                    )
    return None, None


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
        op, found = _first(module)
        if found is not None:
            inner = (
                _inside_contract(before, pass_entry, context, deadline) if pass_entry.startswith(_CONTRACT) else None
            )
            return inner or TypesBroke(pass_entry, _replaced_operand(before, module, op, found) or found)
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


def _all_ops(module: ir.Module | ir.Operation) -> list:
    return [op for function in _functions(module) for op in function.regions[0].blocks[0].operations]


_CONTRACT = "torch-lower-to-backend-contract"
_RETURN_MISMATCH = "doesn't match function result type"
_CONTRACT_OPTION = re.compile(r"([\w-]+)=(\{[^}]*\}|[^ }]*)")


def _inside_contract(before: ir.Operation, pass_entry: str, context: ir.Context, deadline: float) -> TypesBroke | None:
    """The step of the contract pass's simplification pipeline after which types first
    disagree (each iteration pass by pass, up to its `max-iterations` or a fixed point),
    named `<contract pass> > iteration N: <pass>`; None when the replay does not show it."""
    options = dict(_CONTRACT_OPTION.findall(pass_entry[pass_entry.find("{") :]))
    simplification = (
        f"torch-simplification-pipeline{{decompose-complex-ops={options.get('decompose', 'true')} "
        f"shape-dtype-refine={options.get('shape-dtype-refine', 'true')} "
        f"backend-legal-ops={options.get('backend-legal-ops', '').strip('{}')} "
        f"extra-library={options.get('extra-library', '')}}}"
    )
    try:
        passes = expand([simplification], context)
    except ir.MLIRError:
        return None
    module = parse_module(before.get_asm(enable_debug_info=False), context)
    for iteration in range(1, int(options.get("max-iterations", "10")) + 1):
        start = str(module)
        for inner in passes:
            if time.monotonic() > deadline:
                return None
            try:
                run_pipeline(module, [inner])
            except ir.MLIRError:
                return None
            found = first_disagreement(module)
            if found is not None:
                return TypesBroke(f"{_CONTRACT} > iteration {iteration}: {inner}", found)
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
    for old, new in zip(_functions(before), _functions(module)):
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
            return TypesBroke(pass_entry, found)
    return None


def _functions(module: ir.Module | ir.Operation) -> list:
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    return [op for op in body.operations if op.operation.name == "func.func"]


def _return_operands(function) -> list:
    *_, terminator = function.regions[0].blocks[0].operations
    return list(terminator.operation.operands) if terminator.operation.name == "func.return" else []
