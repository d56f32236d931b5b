"""JIT IR importer: a TorchScript graph (`torch._C.Graph`) -> raw torch dialect.

The graph is written out as MLIR text in the generic op form and parsed. Tensors are
`!torch.tensor` (no value semantics, as TorchScript has them); each tensor argument of
`@main` carries a `torch.type_bound` with its known shape and dtype, from which
`torch-function-to-torch-backend-pipeline` infers the rest. Each node names its op
from its schema (`aten::add.Tensor` -> `torch.aten.add.Tensor`); an op the torch
dialect does not register becomes `torch.operator "aten.foo"`, so the failure shows up
in lowering, where the op's location (`loc("aten::foo")`) names it.

Graph inputs that are not function arguments (module `self`, parameters captured as
device data, scalars) are given as `ConstantInput`s: tensors become literals kept as
`dense_resource` blobs (never elided), scalars become `torch.constant.*`, modules
resolve `prim::GetAttr`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import torch_mlir.dialects._torch_ops_gen as _torch_ops
from torch_mlir import ir

from compiler.frontends.jit_types import (
    builtin_tensor_type,
    element_type,
    float_literal,
    mlir_type,
    recorded_type,
    string_literal,
    value_tensor_type,
)
from compiler.stages import StageError, new_context, parse_module

__all__ = [
    "ConstantInput",
    "EmittedGraph",
    "ImportedGraph",
    "TensorArg",
    "emit_graph",
    "import_graph",
    "parse_emitted",
    "torch_dialect_ops",
]


@dataclass(frozen=True)
class TensorArg:
    """A tensor graph input that becomes an argument of `@main` (-1 marks a dynamic dim)."""

    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class ConstantInput:
    """A graph input whose value is known: inlined as a constant (or a module for GetAttr)."""

    value: Any


GraphInput = TensorArg | ConstantInput


@dataclass
class ImportedGraph:
    module: ir.Module
    # `ns.name[.overload]` of every op emitted as `torch.operator` (unknown to the dialect).
    unknown_ops: list[str] = field(default_factory=list)


_TORCH_DIALECT_OPS: frozenset[str] | None = None


def torch_dialect_ops() -> frozenset[str]:
    """Names of every op the torch dialect registers (`torch.aten.mm`, ...)."""
    global _TORCH_DIALECT_OPS
    if _TORCH_DIALECT_OPS is None:
        _TORCH_DIALECT_OPS = frozenset(
            cls.OPERATION_NAME for cls in vars(_torch_ops).values() if hasattr(cls, "OPERATION_NAME")
        )
    return _TORCH_DIALECT_OPS


def import_graph(
    graph: torch._C.Graph,
    inputs: Sequence[GraphInput],
    *,
    func_name: str = "main",
    context: ir.Context | None = None,
) -> ImportedGraph:
    """Stage `import`: `graph` as a torch-dialect module with one function `@func_name`
    (`emit_graph`, then `parse_emitted`).

    `inputs` has one entry per graph input. The function returns the graph's outputs
    flattened through tuples and lists (depth first), which must all be tensors.
    Raises StageError("import") on anything it cannot import.
    """
    return parse_emitted(emit_graph(graph, inputs, func_name=func_name), context)


@dataclass
class EmittedGraph:
    """A graph written out as MLIR text, not yet parsed: it depends on torch, the graph and
    this importer, and on torch-mlir only through the op names its torch dialect registers
    (`torch_dialect_ops`, read from torch-mlir's generated Python), so it outlives a
    rebuild of torch-mlir's native libraries."""

    text: str
    # `ns.name[.overload]` of every op emitted as `torch.operator` (unknown to the dialect).
    unknown_ops: list[str] = field(default_factory=list)


def emit_graph(graph: torch._C.Graph, inputs: Sequence[GraphInput], *, func_name: str = "main") -> EmittedGraph:
    """The first half of stage `import`: `graph` as MLIR text (see `import_graph`)."""
    graph_inputs = list(graph.inputs())
    if len(inputs) != len(graph_inputs):
        raise StageError("import", f"the graph has {len(graph_inputs)} inputs, {len(inputs)} were described")
    emitter = _Emitter()
    try:
        text = emitter.function(graph, inputs, func_name)
    except StageError:
        raise
    except Exception as error:  # a bug or gap of the importer: say where
        raise StageError("import", f"JIT importer: {type(error).__name__}: {error}") from error
    return EmittedGraph(text, sorted(set(emitter.unknown_ops)))


def parse_emitted(emitted: EmittedGraph, context: ir.Context | None = None) -> ImportedGraph:
    """The second half of stage `import`: the text parsed by torch-mlir."""
    try:
        module = parse_module(emitted.text, context or new_context())
    except ir.MLIRError as error:
        first = str(error).strip().splitlines()
        raise StageError(
            "import",
            f"the imported IR does not parse: {first[0] if first else error}",
            diagnostics=[str(error)],
            input_ir=emitted.text,
        ) from None
    return ImportedGraph(module, list(emitted.unknown_ops))


# --- the emitter ---------------------------------------------------------------------


class _Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.ssa: dict[int, str] = {}  # Value.unique() -> SSA name
        self.types: dict[str, str] = {}  # SSA name -> MLIR type
        self.objects: dict[int, Any] = {}  # Value.unique() -> python object (modules)
        self.constant_tensors: dict[int, torch.Tensor] = {}  # Value.unique() -> literal tensor
        self.resources: dict[str, str] = {}  # blob name -> hex
        self.resource_of_tensor: dict[int, str] = {}  # id(tensor) -> blob name
        self.keep_alive: list[Any] = []
        self.unknown_ops: list[str] = []
        self.known: dict[str, Any] = {}  # SSA name -> value of a constant int or bool
        self.counter = 0

    # -- helpers

    def fresh(self) -> str:
        self.counter += 1
        return f"%t{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def op(
        self,
        name: str,
        operands: Sequence[str],
        result_types: Sequence[str],
        *,
        attributes: str = "",
        regions: str = "",
        location: str = "",
    ) -> list[str]:
        """Emit one op in generic form; returns the SSA names of its results."""
        if len(result_types) == 1:
            results = [self.fresh()]
            prefix = f"{results[0]} = "
        elif result_types:
            base = self.fresh()
            results = [f"{base}#{i}" for i in range(len(result_types))]
            prefix = f"{base}:{len(result_types)} = "
        else:
            results, prefix = [], ""
        operand_types = ", ".join(self.types[o] for o in operands)
        result_text = ", ".join(result_types)
        if len(result_types) != 1:
            result_text = f"({result_text})"
        line = f'{prefix}"{name}"({", ".join(operands)})'
        if regions:
            line += f" ({regions})"
        if attributes:
            line += f" {{{attributes}}}"
        line += f" : ({operand_types}) -> {result_text}"
        if location:
            line += f" loc({string_literal(location)})"
        self.emit(line)
        for result, result_type in zip(results, result_types):
            self.types[result] = result_type
        return results

    def bind(self, value: torch._C.Value, ssa: str) -> None:
        self.ssa[value.unique()] = ssa

    def use(self, value: torch._C.Value) -> str:
        key = value.unique()
        if key in self.ssa:
            return self.ssa[key]
        if key in self.objects:
            raise StageError(
                "import",
                f"value %{value.debugName()} is a {type(self.objects[key]).__name__} object, "
                f"used by {', '.join(sorted({u.user.kind() for u in value.uses()}))}; only prim::GetAttr can use it",
            )
        raise StageError("import", f"value %{value.debugName()} is used before it is defined")

    def cast_to(self, ssa: str, wanted: str) -> str:
        """`ssa` as type `wanted`: derefine into an Optional/union, or a tensor static-info cast."""
        have = self.types[ssa]
        if have == wanted:
            return ssa
        if have.startswith("!torch.tensor") and wanted.startswith("!torch.tensor"):
            return self.op("torch.tensor_static_info_cast", [ssa], [wanted])[0]
        return self.op("torch.derefine", [ssa], [wanted])[0]

    # -- function

    def function(self, graph: torch._C.Graph, inputs: Sequence[GraphInput], func_name: str) -> str:
        arguments = []
        for index, (value, described) in enumerate(zip(graph.inputs(), inputs)):
            if isinstance(described, TensorArg):
                if value.type().kind() != "TensorType":
                    raise StageError(
                        "import",
                        f"graph input {index} (%{value.debugName()}) is a {value.type()}, described as a tensor",
                    )
                name = f"%arg{len(arguments)}"
                bound = value_tensor_type(described.shape, described.dtype)
                arguments.append(f"{name}: !torch.tensor {{torch.type_bound = {bound}}}")
                self.types[name] = "!torch.tensor"
                self.bind(value, name)
        # Constants after the signature is known: they are emitted into the body.
        for value, described in zip(graph.inputs(), inputs):
            if isinstance(described, ConstantInput):
                self.bind_python_value(value, described.value)
        self.block_body(graph.block())
        results = self.flatten_outputs(list(graph.outputs()))
        result_types = [self.types[r] for r in results]
        self.emit(f'"func.return"({", ".join(results)}) : ({", ".join(result_types)}) -> ()')
        body = "\n".join(self.lines)
        signature = f"func.func @{func_name}({', '.join(arguments)}) -> ({', '.join(result_types)})"
        text = f"module {{\n{signature} {{\n{body}\n}}\n}}\n"
        if self.resources:
            blobs = ",\n".join(f'      {name}: "{data}"' for name, data in self.resources.items())
            text += f"\n{{-#\n  dialect_resources: {{\n    builtin: {{\n{blobs}\n    }}\n  }}\n#-}}\n"
        return text

    def flatten_outputs(self, values: Sequence[torch._C.Value]) -> list[str]:
        flat: list[str] = []
        for value in values:
            kind = value.type().kind()
            producer = value.node()
            if kind in ("TupleType", "ListType") and producer.kind() in ("prim::TupleConstruct", "prim::ListConstruct"):
                flat.extend(self.flatten_outputs(list(producer.inputs())))
            elif kind == "TupleType":
                elements = [mlir_type(t) for t in value.type().elements()]
                unpacked = self.op("torch.prim.TupleUnpack", [self.use(value)], elements)
                for jit_element in value.type().elements():
                    if jit_element.kind() != "TensorType":
                        raise StageError("import", f"a graph output holds a {jit_element}, not a tensor")
                flat.extend(unpacked)
            elif kind == "TensorType":
                flat.append(self.use(value))
            else:
                raise StageError(
                    "import",
                    f"graph output %{value.debugName()} is a {value.type()}; only tensors "
                    "(in tuples and lists) can be returned",
                )
        return flat

    # -- blocks and nodes

    def block_body(self, block: torch._C.Block) -> None:
        for node in block.nodes():
            self.node(node)

    def region(
        self, block: torch._C.Block, argument_types: Sequence[str], terminator: str, yield_types: Sequence[str] | None
    ) -> str:
        """Emit `block` as a region and return its text; `yield_types` casts what it yields."""
        saved_lines, saved_indent = self.lines, self.indent
        self.lines, self.indent = [], 2
        arguments = []
        for value, arg_type in zip(block.inputs(), argument_types):
            name = self.fresh()
            self.types[name] = arg_type
            self.bind(value, name)
            arguments.append(f"{name}: {arg_type}")
        self.block_body(block)
        outputs = [self.use(v) for v in block.outputs()]
        if yield_types is not None:
            outputs = [self.cast_to(o, t) for o, t in zip(outputs, yield_types)]
        self.emit(f'"{terminator}"({", ".join(outputs)}) : ({", ".join(self.types[o] for o in outputs)}) -> ()')
        header = f"^bb0({', '.join(arguments)}):\n" if arguments else ""
        text = "{\n" + header + "\n".join(self.lines) + "\n  " + "}"
        self.lines, self.indent = saved_lines, saved_indent
        return text

    def node(self, node: torch._C.Node) -> None:
        kind = node.kind()
        handler = _NODE_HANDLERS.get(kind)
        if handler is not None:
            handler(self, node)
            return
        if kind in ("prim::CallMethod", "prim::CallFunction"):
            raise StageError("import", f"{kind} is not supported: inline the graph first (torch._C._jit_pass_inline)")
        self.generic(node)

    def generic(self, node: torch._C.Node) -> None:
        qualified = _qualified_op_name(node)  # "aten::add.Tensor"
        namespace, _, rest = qualified.partition("::")
        dialect_name = _view_of_copy(f"torch.{namespace}.{_ALIASES.get(qualified, rest)}")
        operands = [self.use(v) for v in node.inputs()]
        result_types = [recorded_type(v.type()) for v in node.outputs()]
        attributes = ""
        if dialect_name not in torch_dialect_ops():
            self.unknown_ops.append(f"{namespace}.{rest}")
            attributes = f"name = {string_literal(f'{namespace}.{rest}')}"
            dialect_name = "torch.operator"
        results = self.op(dialect_name, operands, result_types, attributes=attributes, location=qualified)
        for value, result in zip(node.outputs(), results):
            self.bind(value, result)

    # -- constants

    def bind_python_value(self, value: torch._C.Value, python_value: Any) -> None:
        if isinstance(python_value, (torch.nn.Module, torch.jit.ScriptModule, torch._C.ScriptObject)):
            self.objects[value.unique()] = python_value
            return
        ssa = self.python_constant(python_value, value.type(), location=value.debugName())
        wanted = mlir_type(value.type())
        if self.types[ssa] != wanted and not wanted.startswith("!torch.tensor"):
            ssa = self.cast_to(ssa, wanted)  # e.g. None as an Optional[int]
        self.bind(value, ssa)
        if isinstance(python_value, torch.Tensor):
            self.constant_tensors[value.unique()] = python_value

    def python_constant(self, python_value: Any, jit_type: torch._C.JitType | None = None, location: str = "") -> str:
        """Emit a constant for a python value; returns its SSA name."""
        if python_value is None:
            return self.op("torch.constant.none", [], ["!torch.none"])[0]
        if jit_type is not None and jit_type.kind() == "BoolType" and type(python_value) is int:
            # LTC's graph holds a bool list constant (native_layer_norm_backward's
            # output_mask) as ints, which TorchScript tolerates and the torch dialect does not.
            python_value = bool(python_value)
        if isinstance(python_value, bool):
            ssa = self.op(
                "torch.constant.bool", [], ["!torch.bool"], attributes=f"value = {str(python_value).lower()}"
            )[0]
            self.known[ssa] = python_value
            return ssa
        if isinstance(python_value, int):
            ssa = self.op("torch.constant.int", [], ["!torch.int"], attributes=f"value = {python_value} : i64")[0]
            self.known[ssa] = python_value
            return ssa
        if isinstance(python_value, float):
            return self.op(
                "torch.constant.float", [], ["!torch.float"], attributes=f"value = {float_literal(python_value)} : f64"
            )[0]
        if isinstance(python_value, str):
            return self.op(
                "torch.constant.str", [], ["!torch.str"], attributes=f"value = {string_literal(python_value)}"
            )[0]
        if isinstance(python_value, torch.device):
            return self.op(
                "torch.constant.device",
                [],
                ["!torch.Device"],
                attributes=f"value = {string_literal(str(python_value))}",
            )[0]
        if isinstance(python_value, torch.dtype):
            return self.python_constant(_DTYPE_CODES[python_value])
        if isinstance(python_value, torch.Tensor):
            return self.tensor_literal(python_value, location)
        if isinstance(python_value, (list, tuple)):
            element_types = None
            if jit_type is not None and jit_type.kind() == "TupleType":
                element_types = list(jit_type.elements())
            elif jit_type is not None and jit_type.kind() == "ListType":
                element_types = [jit_type.getElementType()] * len(python_value)
            elements = [
                self.python_constant(v, element_types[i] if element_types else None, location)
                for i, v in enumerate(python_value)
            ]
            if isinstance(python_value, tuple):
                tuple_type = "!torch.tuple<" + ", ".join(self.types[e].removeprefix("!torch.") for e in elements) + ">"
                return self.op("torch.prim.TupleConstruct", elements, [tuple_type])[0]
            if jit_type is not None and jit_type.kind() == "ListType":
                list_type = mlir_type(jit_type)
                if jit_type.getElementType().kind() == "OptionalType":
                    inner = mlir_type(jit_type.getElementType())
                    elements = [self.cast_to(e, inner) for e in elements]
            elif elements:
                list_type = f"!torch.list<{self.types[elements[0]].removeprefix('!torch.')}>"
            else:
                raise StageError("import", "an empty list constant of unknown element type")
            return self.op("torch.prim.ListConstruct", elements, [list_type])[0]
        raise StageError(
            "import", f"cannot import a constant of type {type(python_value).__name__}: {python_value!r:.80}"
        )

    def tensor_literal(self, tensor: torch.Tensor, location: str = "") -> str:
        tensor = tensor.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.is_quantized or tensor.is_sparse:
            raise StageError("import", f"cannot import a {tensor.layout} / quantized tensor constant")
        shape, dtype = tuple(tensor.shape), tensor.dtype
        storage = tensor.contiguous()
        if dtype == torch.bfloat16:
            array = storage.view(torch.int16).numpy()
        elif dtype == torch.bool:
            array = storage.numpy().astype(np.uint8)
        else:
            array = storage.numpy()
        data = np.ascontiguousarray(array).tobytes()
        builtin_type = builtin_tensor_type(shape, dtype)
        if tensor.numel() <= 1:
            # Resources mishandle 0-d and splat data; small literals are plain hex.
            attribute = f'dense<"0x{data.hex().upper()}"> : {builtin_type}' if data else f"dense<> : {builtin_type}"
        else:
            key = id(tensor)
            if key not in self.resource_of_tensor:
                name = (
                    f"jit_tensor_{len(self.resources)}_{'x'.join(map(str, shape))}_{str(dtype).removeprefix('torch.')}"
                )
                alignment = max(array.itemsize, 1)
                self.resources[name] = "0x" + struct.pack("<I", alignment).hex() + data.hex().upper()
                self.resource_of_tensor[key] = name
                self.keep_alive.append(tensor)
            attribute = f"dense_resource<{self.resource_of_tensor[key]}> : {builtin_type}"
        # A value-semantics literal copied to a tensor: what value-semantics maximization expects.
        dims = ",".join(map(str, shape))
        literal = self.op(
            "torch.vtensor.literal",
            [],
            [f"!torch.vtensor<[{dims}],{element_type(dtype)}>"],
            attributes=f"value = {attribute}",
            location=location,
        )[0]
        copied = self.op("torch.copy.to_tensor", [literal], [f"!torch.tensor<[{dims}],{element_type(dtype)}>"])[0]
        return self.cast_to(copied, "!torch.tensor")


# --- node handlers -----------------------------------------------------------------------


def _qualified_op_name(node: torch._C.Node) -> str:
    """`ns::name[.overload]` from the node's schema, or its kind when it has none."""
    schema_text = node.schema()
    if schema_text and schema_text != "(no schema)":
        schema = torch._C.parse_schema(schema_text)
        return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    return node.kind()


# TorchScript spellings of ops whose canonical name the torch dialect lowers.
_ALIASES = {
    "aten::__and__.Tensor": "bitwise_and.Tensor",
    "aten::__or__.Tensor": "bitwise_or.Tensor",
    "aten::__xor__.Tensor": "bitwise_xor.Tensor",
    "aten::__and__.Scalar": "bitwise_and.Scalar",
    "aten::__lshift__.Tensor": "bitwise_left_shift.Tensor",
    "aten::__rshift__.Tensor": "bitwise_right_shift.Tensor",
}


def _view_of_copy(dialect_name: str) -> str:
    """LTC's functional `*_copy` ops as the view ops they copy (`torch.aten.t_copy` -> `torch.aten.t`).

    Shape and dtype inference know the view ops; the graph is functional, so the
    views cannot alias a mutation.
    """
    base, dot, overload = dialect_name.partition(".aten.")[2].partition(".")
    if not base.endswith("_copy") or base in ("_to_copy", "lift_fresh_copy"):
        return dialect_name
    view = "torch.aten." + base.removesuffix("_copy") + (f".{overload}" if dot else "")
    return view if view in torch_dialect_ops() else dialect_name


def _constant(emitter: _Emitter, node: torch._C.Node) -> None:
    output = node.output()
    kind = output.type().kind()
    if kind == "TensorType":
        ssa = emitter.tensor_literal(node.t("value"), location=output.debugName())
        emitter.constant_tensors[output.unique()] = node.t("value")
    elif kind in ("FunctionType", "ClassType", "InterfaceType"):
        # Left behind by inlining; an error only if something uses it.
        emitter.objects[output.unique()] = output.type()
        return
    else:
        ssa = emitter.python_constant(output.toIValue(), output.type())
        wanted = mlir_type(output.type())
        if emitter.types[ssa] != wanted and not wanted.startswith("!torch.tensor"):
            ssa = emitter.cast_to(ssa, wanted)
    emitter.bind(output, ssa)


def _get_attr(emitter: _Emitter, node: torch._C.Node) -> None:
    owner = node.input()
    if owner.unique() not in emitter.objects:
        raise StageError("import", f"prim::GetAttr on %{owner.debugName()}, which is not a known module")
    attribute = getattr(emitter.objects[owner.unique()], node.s("name"))
    emitter.bind_python_value(node.output(), attribute)


def _if(emitter: _Emitter, node: torch._C.Node) -> None:
    result_types = [mlir_type(v.type()) for v in node.outputs()]
    then_block, else_block = list(node.blocks())
    regions = ", ".join(emitter.region(b, [], "torch.prim.If.yield", result_types) for b in (then_block, else_block))
    condition = emitter.use(node.input())
    results = emitter.op("torch.prim.If", [condition], result_types, regions=regions, location="prim::If")
    for value, result in zip(node.outputs(), results):
        emitter.bind(value, result)


# Loops with a known trip count up to this are unrolled at import: shape inference
# cannot see through a `torch.prim.Loop` carrying tensors.
MAX_UNROLLED_TRIPS = 256


def _loop(emitter: _Emitter, node: torch._C.Node) -> None:
    inputs = list(node.inputs())
    operands = [emitter.use(v) for v in inputs]
    carried_types = [mlir_type(v.type()) for v in node.outputs()]
    (body,) = list(node.blocks())
    trips = emitter.known.get(operands[0])
    if (
        isinstance(trips, int)
        and trips <= MAX_UNROLLED_TRIPS
        and emitter.known.get(operands[1]) is True
        and _always_true(emitter, list(body.outputs())[0])
    ):
        carried = operands[2:]
        for trip in range(max(trips, 0)):
            block_inputs = list(body.inputs())
            emitter.bind(block_inputs[0], emitter.python_constant(trip))
            for value, ssa in zip(block_inputs[1:], carried):
                emitter.bind(value, ssa)
            emitter.block_body(body)
            carried = [emitter.use(v) for v in list(body.outputs())[1:]]
        for value, ssa, wanted in zip(node.outputs(), carried, carried_types):
            emitter.bind(value, emitter.cast_to(ssa, wanted))
        return
    operands = operands[:2] + [emitter.cast_to(o, t) for o, t in zip(operands[2:], carried_types)]
    region = emitter.region(
        body, ["!torch.int"] + carried_types, "torch.prim.Loop.condition", ["!torch.bool"] + carried_types
    )
    results = emitter.op("torch.prim.Loop", operands, carried_types, regions=region, location="prim::Loop")
    for value, result in zip(node.outputs(), results):
        emitter.bind(value, result)


def _always_true(emitter: _Emitter, condition: torch._C.Value) -> bool:
    if condition.node().kind() == "prim::Constant":
        return condition.toIValue() is True
    return emitter.known.get(emitter.ssa.get(condition.unique(), "")) is True


def _native_batch_norm(emitter: _Emitter, node: torch._C.Node) -> None:
    # LTC records `native_batch_norm` even in eval mode; when only its output is used,
    # `batch_norm` says the same and avoids the saved-statistics results, whose shapes
    # the torch dialect infers differently from its own decomposition.
    outputs = list(node.outputs())
    if any(o.uses() for o in outputs[1:]) or len(list(node.inputs())) != 8:
        emitter.generic(node)
        return
    operands = [emitter.use(v) for v in node.inputs()]
    cudnn_enabled = emitter.python_constant(False)
    result = emitter.op(
        "torch.aten.batch_norm", operands + [cudnn_enabled], ["!torch.tensor"], location="aten::native_batch_norm"
    )[0]
    emitter.bind(outputs[0], result)


def _unchecked_cast(emitter: _Emitter, node: torch._C.Node) -> None:
    # Dead code may cast a None constant to the type it refines; give the cast an Optional.
    operand = emitter.use(node.input())
    result_type = mlir_type(node.output().type())
    if emitter.types[operand] == "!torch.none" and result_type != "!torch.none":
        operand = emitter.cast_to(operand, f"!torch.optional<{result_type.removeprefix('!torch.')}>")
    result = emitter.op("torch.prim.unchecked_cast", [operand], [result_type], location="prim::unchecked_cast")[0]
    emitter.bind(node.output(), result)


def _scalar_implicit(emitter: _Emitter, node: torch._C.Node) -> None:
    # LTC passes scalars as 0-d device data; fold a known one into a constant number.
    tensor = emitter.constant_tensors.get(node.input().unique())
    if tensor is not None and tensor.numel() == 1:
        emitter.bind(node.output(), emitter.python_constant(tensor.item()))
    else:
        emitter.generic(node)


_NODE_HANDLERS = {
    "prim::Constant": _constant,
    "prim::GetAttr": _get_attr,
    "prim::If": _if,
    "prim::Loop": _loop,
    "aten::ScalarImplicit": _scalar_implicit,
    "prim::unchecked_cast": _unchecked_cast,
    "aten::native_batch_norm": _native_batch_norm,
}

# ScalarType codes TorchScript uses for dtypes.
_DTYPE_CODES = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex32: 8,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.bfloat16: 15,
}
