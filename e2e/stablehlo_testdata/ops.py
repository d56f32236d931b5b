"""Which op on which element type a StableHLO program runs: the op under test of a testdata
program, and every op of a program the `stablehlo` config lowered.

An op's element type (`OpUse.element`) is its first result's, after its first operand's
and `->` when no operand has it: `stablehlo.scatter` on `f32`, `stablehlo.select` on
`f32` (not its `i1` predicate), `stablehlo.convert` on `i32->f16`, `stablehlo.compare` on
`f32->i1`.

A testdata program's op under test (`op_under_test`) is read from its parsed `@main`: the
ops `@main` runs, and those of the helper functions it calls (JAX's `@argmax`,
`@cumlogsumexp`), apart from constants, calls and the checks. Of these, the op its file
is named after (`select_and_scatter_...`: `stablehlo.select_and_scatter`, not the `pad`
and `slice` around it; `quantized/add_qi8`: `stablehlo.add`, not the quantize and
dequantize); else the only kind of op apart from the broadcasts and (de)quantization
around it (`quantized/cos_...`: `stablehlo.cosine`). A composite program has none: a
failure of `random_*` (a `while` loop of many ops) or of complex `max` (compare and
select) is no one op's. A program torch-mlir's context
cannot parse (its `chlo` ops: no dialect there) is read line by line instead
(`_op_under_test_by_text`), and where even that finds no type, by its file name's dtype
word (`float32` -> `f32`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch_mlir import ir

from compiler.stages import new_context

# Not ops under test: the program's plumbing and the checks.
PLUMBING = frozenset({"func.func", "func.call", "func.return", "stablehlo.return"})
PLUMBING |= {"stablehlo.constant", "stablehlo.custom_call", "chlo.constant"}
# Around the op under test, not it: broadcasts of its operands, its (de)quantization.
AROUND = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"})
# The dtype words of testdata file names, as MLIR element types.
FILE_DTYPES = {
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "ui8",
    "uint16": "ui16",
    "uint32": "ui32",
    "uint64": "ui64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "complex<f32>",
    "complex128": "complex<f64>",
}


@dataclass(frozen=True, order=True)
class OpUse:
    """An op on an element type: what a testdata program tests, or one of a program's ops."""

    op: str  # `stablehlo.scatter`
    element: str  # `f32`, `i32->f16`

    def __str__(self) -> str:
        return f"{self.op} on {self.element}"


_QUANTIZED = re.compile(r"!quant\.uniform<([^:<]+(?:<[^>]*>)?):(\w+)[^>]*>")


def _element(value_type: ir.Type) -> str:
    """A value's element type; a quantized one as its storage and expressed types alone
    (`!quant.uniform<i8:f32>`: scales and zero points differ program to program)."""
    element = str(getattr(value_type.maybe_downcast(), "element_type", value_type))
    return _QUANTIZED.sub(r"!quant.uniform<\1:\2>", element)


def op_use(operation: ir.Operation) -> OpUse:
    """`operation` on its element type (see the module's docstring)."""
    operands = [_element(value.type) for value in operation.operands]
    results = [_element(result.type) for result in operation.results]
    element = results[0] if results else (operands[0] if operands else "none")
    if operands and element not in operands:
        element = f"{operands[0]}->{element}"
    return OpUse(operation.name, element)


def _walk(block: ir.Block):
    for op in block.operations:
        operation = op.operation
        yield operation
        for region in operation.regions:
            for inner in region.blocks:
                yield from _walk(inner)


def program_ops(text: str, context: ir.Context | None = None) -> set[OpUse]:
    """Every op of a StableHLO module, nested ones included, on its element type; raises
    `ir.MLIRError` when the text does not parse."""
    module = ir.Module.parse(text, context or new_context())
    return {op_use(operation) for operation in _walk(module.body) if operation.name not in PLUMBING}


def _functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {
        ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }


def _callee(operation: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(operation.attributes["callee"]).value


def _body(function: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in function.regions[0].blocks[0].operations]


def _named_after(op: str, name: str) -> bool:
    """Whether the program `name` is named after `op` (`scatter_add_...` after `stablehlo.scatter`)."""
    return re.match(rf"{re.escape(op.partition('.')[2])}(_|$)", name.rpartition("/")[2]) is not None


def op_under_test(text: str, name: str, context: ir.Context | None = None) -> OpUse | None:
    """The op a testdata program tests, on its element type (see the module's docstring);
    None for a composite, or a program that checks an input as it is (JAX folded its op away)."""
    try:
        module = ir.Module.parse(text, context or new_context())
    except ir.MLIRError:
        return _op_under_test_by_text(text, name)
    functions = _functions(module)
    main = functions.get("main")
    if main is None:
        return None
    candidates = []
    for operation in _body(main):
        if operation.name == "func.call" and _callee(operation) in functions:
            if _callee(operation) not in ("inputs", "expected"):
                helper = _body(functions[_callee(operation)])
                candidates += [op for op in helper if op.name not in PLUMBING]
        elif operation.name not in PLUMBING:
            candidates.append(operation)
    chosen = _the_op(candidates, name, lambda op: op.name)
    return op_use(chosen) if chosen is not None else None


def _the_op(candidates: list, name: str, op_name):
    """Of the ops a program runs, the one it tests: the one it is named after, else the only
    kind of op apart from those `AROUND` it; None for a composite (its failure is no one
    op's: `random_*`, `igamma_*`, complex `max` as compare and select)."""
    named = [op for op in candidates if _named_after(op_name(op), name)]
    if named:
        return max(named, key=lambda op: len(op_name(op)))
    inner = [op for op in candidates if op_name(op) not in AROUND]
    return inner[-1] if len({op_name(op) for op in inner}) == 1 else None


_OP_LINE = re.compile(r"=\s*\"?([a-z_]+\.[a-z_0-9]+)\"?[\s(]")
_TENSOR_ELEMENT = re.compile(r"tensor<(?:[\d?]+x)*(complex<\w+>|[^<>]+?)>")


def _op_under_test_by_text(text: str, name: str) -> OpUse | None:
    """The op under test of a program that does not parse here, chosen as `_the_op` does
    among `@main`'s lines, on the element types its line's types show (or, without them,
    the dtype word of the file name)."""
    main = re.search(r"func\.func (?:public )?@main\(.*?\n  }", text, re.S)
    if main is None:
        return None
    ops = [(m[1], line) for line in main.group(0).splitlines() if (m := _OP_LINE.search(line)) and m[1] not in PLUMBING]
    chosen = _the_op(ops, name, lambda found: found[0])
    if chosen is None:
        return None
    op, line = chosen
    elements = _TENSOR_ELEMENT.findall(line.rpartition(" : ")[2])
    if elements:
        element = elements[0] if elements[-1] == elements[0] else f"{elements[0]}->{elements[-1]}"
    else:
        words = name.rpartition("/")[2].split("_")
        element = next((FILE_DTYPES[word] for word in words if word in FILE_DTYPES), "?")
    return OpUse(op, element)
