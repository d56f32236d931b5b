"""Do the torch dialect's result types agree with what the ops compute from their operands?

    disagreement = first_disagreement(module)       # None, or the first op whose types lie

A torch-dialect op carries its result type (`!torch.vtensor<[2,3],f32>`); nothing checks
it against its operands. A shape function that gets broadcasting wrong, or a fold that
replaces a value by one of another shape, leaves IR that verifies, and a later pass
reports the damage (a `tensor.cast` that cannot cast, a wrong result).

This module checks each `torch.aten.*` op alone, as torch would run it: every tensor
operand a meta tensor of its declared type (a dynamic dim given a sample size), every
scalar and list operand its constant; torch's own meta kernel gives the result's shape,
which must agree with the declared rank and static dims (dtypes are not judged). An op whose
operands are not all known (a scalar computed at run time), that torch does not know, or
whose meta kernel raises is not judged, unless every operand shape is static and the
kernel says they do not fit the op (a disagreement too). A dim that changes with the
sample size is not judged either.

Part of the replay runtime: a bundle that starts where the types still agreed runs the
step that broke them, then `types_agree` as a Python pass (`python:compiler.replay_runtime.
type_check:types_agree`), which fails the way the reducer saw (`compiler.type_check` finds
the step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch_mlir import ir

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
_UNKNOWN_DTYPE = "unk"  # torch-mlir's element type before dtype refinement
_UNSIZED = ("!torch.vtensor", "!torch.tensor")  # a tensor type before shape refinement
# Ops whose result is their operand with other type information (torch-mlir's own).
_SAME_VALUE = ("torch.tensor_static_info_cast", "torch.copy.to_vtensor", "torch.copy.to_tensor", "torch.derefine")
_GUESSED_DTYPES = (torch.float32, torch.int64)  # what an operand of unknown dtype is tried as
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
    removed: bool = False  # the op (upstream of `user`) is gone after the pass: a fold or rewrite of it

    def root(self) -> str:
        """What went wrong, without where: one bug whichever pass or config shows it (a fold
        runs in whichever pass first folds; a shape function in every refinement)."""
        if self.removed or self.replaced_in is not None or self.user is not None:
            return f"a fold or rewrite of {self.op}"
        if self.refused is not None:
            return f"{self.op} given operands torch refuses"
        return f"the result shape of {self.op}"

    def describe(self) -> str:
        if self.removed and self.user is not None:
            return (
                f"the pass removed {self.op} upstream of {self.user.op} (a fold or rewrite of {self.op}), "
                f"after which {self.user.describe()}"
            )
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


def vtensor_parts(type_text: str) -> tuple[list[int | None], str] | None:
    """(dims, None for a dynamic one; element type as written) of a torch value tensor with
    sizes, `!torch.vtensor<[2,?],f32>`; None for another type."""
    match = _VTENSOR.match(type_text)
    if match is None:
        return None
    return [None if d.strip() == "?" else int(d) for d in match[1].split(",") if d.strip()], match[2]


def _vtensor(type_text: str) -> tuple[list[int | None], torch.dtype | None] | None:
    """(dims, dtype) of a value tensor with sizes; its dtype None while refinement has not
    given it one (`unk`): its shape is still judged."""
    parts = vtensor_parts(type_text)
    if parts is None or (parts[1] not in _DTYPES and parts[1] != _UNKNOWN_DTYPE):
        return None
    return parts[0], _DTYPES.get(parts[1])


def _format(dims: Sequence[int | None], dtype: torch.dtype | None) -> str:
    element = next((name for name, known in _DTYPES.items() if known == dtype), _UNKNOWN_DTYPE)
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
    metas = _metas(operands)
    static = all(None not in meta.dims for meta in metas)
    # An operand not given a dtype yet is tried as a float and as an integer: a refusal counts
    # only when the kernel refuses both (its shapes, not a dtype the guess made up).
    fills = _GUESSED_DTYPES if any(meta.dtype is None for meta in metas) else (None,)
    outcome = None
    for fill in fills:
        outcome = _computed(overload, [_materialize(operand, sample, fill) for operand in operands], static)
        if not isinstance(outcome, _Refused):
            return outcome
    return outcome


def _metas(operands: list[Any]) -> list[_Meta]:
    """The tensor operands, lists' included."""
    found = []
    for operand in operands:
        found += _metas(operand) if isinstance(operand, list) else [operand] if isinstance(operand, _Meta) else []
    return found


def _materialize(operand: Any, sample: int, fill: torch.dtype | None = None) -> Any:
    """A meta tensor for a tensor operand (of dtype `fill` where its own is not known yet:
    shapes follow the operands' shapes, not their dtypes); other operands as they are."""
    if isinstance(operand, _Meta):
        dims = [sample if d is None else d for d in operand.dims]
        return torch.empty(dims, dtype=operand.dtype or fill, device="meta")
    if isinstance(operand, list):
        return [_materialize(item, sample, fill) for item in operand]
    return operand


@dataclass(frozen=True)
class _Meta:
    dims: tuple[int | None, ...]
    dtype: torch.dtype | None  # None: not refined yet


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
    if name in _SAME_VALUE and len(results) == 1 and str(results[0].type) in _UNSIZED:
        operand = values.get(op.operation.operands[0], _UNKNOWN)  # the same tensor, its sizes not declared
        if isinstance(operand, _Meta):
            values[results[0]] = operand
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
    return first_with_op(module)[1]


def first_with_op(module: ir.Module, values: dict | None = None) -> tuple[Any, Disagreement | None]:
    """`first_disagreement`, with the op (None, None: none disagrees); `values` gets what
    is known of each value (a constant, a list, a `_Meta` tensor) up to there."""
    values = {} if values is None else values
    for function in functions(module):
        bounds = _type_bounds(function)
        for index, argument in enumerate(function.regions[0].blocks[0].arguments):
            declared = _vtensor(str(argument.type)) or _vtensor(bounds.get(index, ""))
            if declared is not None:
                values[argument] = _Meta(tuple(declared[0]), declared[1])
        for op in _body_ops(function.regions[0].blocks[0]):
            _known(op, values)
            judged = _calculated(op)  # a calculation's result is its wrapped op's
            if judged is None:
                continue
            declared = [_vtensor(str(result.type)) for result in op.operation.results]
            unsized = _unsized(op)
            if unsized is None and (not declared or any(d is None for d in declared)):
                continue
            computed = [_judge_op(judged, values, sample) for sample in SAMPLE_SIZES]
            if all(isinstance(c, _Refused) for c in computed):
                line = str(judged.operation).strip()
                shown = unsized if unsized is not None else _format(*declared[0])
                return judged, Disagreement(judged.operation.name, line, shown, "", refused=computed[0].message)
            if unsized is not None:  # nothing declared to judge: what torch computes stands for it
                _infer(op, judged, values, computed)
                continue
            if any(c is None or isinstance(c, _Refused) or len(c) != len(declared) for c in computed):
                continue
            for index, expected in enumerate(declared):
                outcomes = [c[index] for c in computed]
                if _disagrees(expected, outcomes):
                    dims = [
                        None if len({o[0][d] for o in outcomes}) > 1 else outcomes[0][0][d]
                        for d in range(len(outcomes[0][0]))
                    ]
                    return judged, Disagreement(
                        judged.operation.name,
                        str(judged.operation).strip(),
                        _format(*expected),
                        _format(dims, expected[1]),
                    )
    return None, None


# Ops whose first region computes their result (torch-mlir's shape and dtype refinement wraps
# an op in them while it refines): the op inside is checked too, where its type is first given.
CALCULATIONS = ("torch.shape.calculate", "torch.dtype.calculate")


def _type_bounds(function) -> dict[int, str]:
    """Argument index -> the `torch.type_bound` a `!torch.tensor` argument declares (the
    TorchScript and lazy-tensor imports' form, before torch-adjust-calling-conventions)."""
    if "arg_attrs" not in function.attributes:
        return {}
    bounds = {}
    for index, attrs in enumerate(ir.ArrayAttr(function.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        if "torch.type_bound" in attrs:
            bounds[index] = str(ir.TypeAttr(attrs["torch.type_bound"]).value)
    return bounds


def _unsized(op) -> str | None:
    """The type of an op's one tensor result that declares no sizes (`!torch.vtensor`,
    before torch-mlir's refinement): its shape is inferred, not judged."""
    results = op.operation.results
    if len(results) != 1:
        return None
    text = str(results[0].type)
    return text if text in _UNSIZED else None


def _infer(op, judged, values: dict, computed: list) -> None:
    """Record the shape torch computes for an unsized result, so the ops that use it are
    judged (a dim that follows the sample size is dynamic). Its dtype only when every
    tensor operand's is known (else the computation's dtypes were guesses)."""
    if any(not isinstance(c, list) or len(c) != 1 for c in computed):
        return
    shapes = [c[0][0] for c in computed]
    if len({len(shape) for shape in shapes}) != 1:
        return
    dims = tuple(None if len({shape[d] for shape in shapes}) > 1 else shapes[0][d] for d in range(len(shapes[0])))
    operands = [values.get(value, _UNKNOWN) for value in judged.operation.operands]
    known_dtypes = all(meta.dtype is not None for meta in _metas(operands))
    values[op.operation.results[0]] = _Meta(dims, computed[0][0][1] if known_dtypes else None)


def _calculated(op):
    """The op whose result `op`'s is: a calculation's wrapped op (the one its body yields),
    else `op` itself; None for a calculation that yields no op's result."""
    if op.operation.name not in CALCULATIONS:
        return op
    *_, terminator = op.operation.regions[0].blocks[0].operations
    yielded = list(terminator.operation.operands)
    if len(yielded) != 1 or isinstance(yielded[0].owner, ir.Block):
        return None
    return yielded[0].owner


def _body_ops(block) -> list:
    """A block's ops in program order, with those inside a calculation's body before it."""
    ops = []
    for op in block.operations:
        if op.operation.name in CALCULATIONS:
            ops += _body_ops(op.operation.regions[0].blocks[0])
        ops.append(op)
    return ops


def functions(module: ir.Module | ir.Operation) -> list:
    """The module's func.func ops."""
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    return [op for op in body.operations if op.operation.name == "func.func"]


class TypesDisagree(Exception):
    """Raised by `types_agree`: an op's declared types are not what its operands give."""


def types_agree(module: ir.Module) -> None:
    """A Python pass: raises TypesDisagree, naming the first op whose declared result types
    torch does not compute from its operand types (`first_disagreement`)."""
    found = first_disagreement(module)
    if found is not None:
        raise TypesDisagree(found.describe())


# On a module whose @main must return what torch returns: torch's result types, one
# `!torch.vtensor<[6,2],f16>` per result, `;`-separated (`e2e.reducer.declared`).
TORCH_RESULTS_ATTR = "e2e.torch_results"


def declared_results(module: ir.Module) -> list[str]:
    """@main's declared result types, as written."""
    main = next(f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == "main")
    return [str(t) for t in ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results]


def results_disagree(declared: str, torch_type: str) -> bool:
    """Whether a declared result type contradicts torch's: another rank, another static dim,
    another dtype once both are known. A type without sizes (`!torch.vtensor`, `!torch.tensor`)
    says nothing."""
    ours, theirs = vtensor_parts(declared), vtensor_parts(torch_type)
    if ours is None or theirs is None:
        return False
    (dims, element), (torch_dims, torch_element) = ours, theirs
    if len(dims) != len(torch_dims) or any(d is not None and d != t for d, t in zip(dims, torch_dims)):
        return True
    return element != _UNKNOWN_DTYPE and element != torch_element


def record_torch_results(module: ir.Module) -> None:
    """A Python pass: record on the module what torch returns from @main, as its ops compute
    it from the arguments' declared types (`TORCH_RESULTS_ATTR`), for `results_as_torch`
    after the step under test. Computed from the program itself, so that a reduced program
    is checked against what torch returns for it, not for the program it was reduced from.
    A result torch's shape functions cannot tell is recorded as `!torch.vtensor` (not judged)."""
    values: dict = {}
    _, found = first_with_op(module, values)
    if found is not None:
        raise TypesDisagree(f"before the step: {found.describe()}")
    main = next(f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == "main")
    *_, terminator = main.regions[0].blocks[0].operations
    recorded = []
    for operand in terminator.operation.operands:
        known = values.get(operand)
        recorded.append(_format(known.dims, known.dtype) if isinstance(known, _Meta) else "!torch.vtensor")
    module.operation.attributes[TORCH_RESULTS_ATTR] = ir.StringAttr.get(";".join(recorded))


def results_as_torch(module: ir.Module) -> None:
    """A Python pass: raises TypesDisagree when @main declares a result of another shape or
    dtype than torch returns (`TORCH_RESULTS_ATTR`): a fold that replaced a value by one of
    another shape leaves IR that verifies and says so in its own types."""
    expected = ir.StringAttr(module.operation.attributes[TORCH_RESULTS_ATTR]).value.split(";")
    for declared, torch_type in zip(declared_results(module), expected):
        if results_disagree(declared, torch_type):
            raise TypesDisagree(f"@main declares {declared} for a result torch returns as {torch_type}")


def torch_type(tensor: torch.Tensor) -> str:
    """The value tensor type torch-mlir gives `tensor`: `!torch.vtensor<[6,2],f16>`."""
    return _format(list(tensor.shape), tensor.dtype)
