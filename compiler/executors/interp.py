"""StableHLO on StableHLO's reference interpreter, in the pinned jaxlib (`jax[cpu]`, the
`runtimes` extra).

The interpreter is written to the StableHLO spec, op by op, element by element: it is an
oracle for what a StableHLO program means, not a compiler. Beside the RefBackend twin
(`stablehlo`, which lowers the same program to linalg and LLVM): when the interpreter
matches torch and the twin does not, the bug is in StableHLO -> linalg -> LLVM; when the
interpreter does not match torch, the program torch-mlir emitted is wrong by the spec (or
the interpreter is).

What the interpreter needs that torch-mlir's output is not (shared with XLA, `xla.py`):
- constants as `dense<...>` and tensor `arith.constant`s as `stablehlo.constant`
  (`xla_ready_text`);
- a StableHLO version jaxlib reads: the module goes as a portable (VHLO) artifact
  downgraded to 1.17.0 and is deserialized into jaxlib's own MLIR context.
And of its own:
- ops it evaluates: the interpreter aborts the process on any other op (`LLVM ERROR:
  Unsupported op`), so stage `lower` refuses a program with one, naming it (`LACKING`:
  the StableHLO ops the pinned interpreter does not evaluate; any op outside `stablehlo`
  and `func`, e.g. `chlo`);
- arguments as dense attributes of the signature's element types (built from the tensor's
  bytes, so bf16, ui8, i1 and complex pass exactly); results its Python binding can read:
  bf16, float8 and complex results cannot be read back (bf16: "Unsupported floating-point
  type"; a complex result ends the process), so `@main` is wrapped in one that returns bf16
  as its i16 bit pattern, float8 as its i8 bits (`stablehlo.bitcast_convert`) and complex as real and imaginary parts
  (`stablehlo.real`, `stablehlo.imag`), which are put back together bit-exactly.
Static shapes only. No JIT and no target: the interpreter computes with LLVM's APFloat and
the host's libm.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from compiler.executors import INSTALL_RUNTIMES, RuntimeExecutor, guarded, outputs_as, to_numpy
from compiler.executors.xla import XLA_STABLEHLO_VERSION, portable_artifact
from compiler.refbackend import ResultType
from compiler.stages import Snapshots, StageError

RUNTIME = "the StableHLO interpreter"
# StableHLO ops the pinned interpreter (jaxlib 0.10.2, StableHLO 1.17) does not evaluate: those
# it calls decomposable ("Operation ... is unsupported at the moment") and those its `eval`
# has no case for ("Unsupported op"). Every other registered `stablehlo` op it evaluates.
LACKING = frozenset(
    "stablehlo." + name
    for name in (
        "async_done async_start batch_norm_grad batch_norm_inference batch_norm_training broadcast cholesky "
        "create_token cross-replica-sum custom_call dot einsum real_dynamic_slice rng rng_bit_generator "
        "set_dimension_size torch_index_select unary_einsum"
    ).split()
)
OTHER_OPS = frozenset({"builtin.module", "func.func", "func.call", "func.return"})
WRAPPED_MAIN = "main_as_emitted"
# float8 types (StableHLO's spelling) -> ml_dtypes' name: read back as their i8 bits, as bf16 is as i16
FLOAT8 = {
    "f8E4M3FN": "float8_e4m3fn",
    "f8E4M3FNUZ": "float8_e4m3fnuz",
    "f8E5M2": "float8_e5m2",
    "f8E5M2FNUZ": "float8_e5m2fnuz",
}


def _bits_type(element_type):
    """The integer type a bf16 or float8 result is read back as, else None."""
    from jaxlib.mlir import ir

    if isinstance(element_type, ir.BF16Type):
        return ir.IntegerType.get_signless(16)
    return (
        ir.IntegerType.get_signless(8) if str(element_type) in FLOAT8 else None
    )  # @main's name once wrapped for readable results


@dataclass(frozen=True)
class Element:
    """How one element type crosses the interpreter's Python boundary."""

    numpy: Any  # the array dtype torch's values come as and go back as
    read_as: str = "plain"  # "plain" (np.asarray), "bits" (as its integer bit pattern), "complex"


def _elements() -> dict[str, Element]:
    import ml_dtypes

    plain = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i1": np.bool_}
    plain.update({f"i{bits}": np.dtype(f"int{bits}") for bits in (8, 16, 32, 64)})
    plain.update({f"ui{bits}": np.dtype(f"uint{bits}") for bits in (8, 16, 32, 64)})
    return {
        **{name: Element(np.dtype(dtype)) for name, dtype in plain.items()},
        "bf16": Element(np.dtype(ml_dtypes.bfloat16), "bits"),
        **{name: Element(np.dtype(getattr(ml_dtypes, attribute)), "bits") for name, attribute in FLOAT8.items()},
        "complex<f32>": Element(np.dtype(np.complex64), "complex"),
        "complex<f64>": Element(np.dtype(np.complex128), "complex"),
    }


@dataclass
class Interpreter(RuntimeExecutor):
    input: str = "stablehlo"
    name: str = "interp"
    title: str = "the StableHLO interpreter"  # how reports name it
    accepts: tuple[str, ...] = ("stablehlo",)
    static_only: bool = True
    by_the_spec: bool = True  # its wrong result is the program's, by the spec (runtime.py's verdicts)

    def missing(self) -> str | None:
        try:
            import jax.interpreters.mlir  # noqa: F401
            from jaxlib.mlir.dialects import stablehlo

            stablehlo.eval_module  # noqa: B018
        except (ImportError, AttributeError):
            return INSTALL_RUNTIMES
        return None

    def compile(
        self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots
    ) -> "InterpreterProgram":
        text = snapshots.record("lower", backend_module)
        artifact = guarded("lower", "StableHLO serialization", lambda: portable_artifact(text))
        return guarded("lower", RUNTIME, lambda: InterpreterProgram(artifact, list(result_dtypes)))


class InterpreterProgram:
    """A program deserialized into jaxlib's context, checked and wrapped for the interpreter."""

    def __init__(self, artifact: bytes, result_dtypes: list[ResultType]):
        from jax.interpreters.mlir import make_ir_context
        from jaxlib.mlir import ir
        from jaxlib.mlir.dialects import stablehlo

        self.result_dtypes, self.artifact = result_dtypes, artifact
        self.context = make_ir_context()
        stablehlo.register_interpreter_dialect(self.context)
        self.diagnostics: list[str] = []
        self.context.attach_diagnostic_handler(self._diagnostic)
        with self.context:
            self.module = stablehlo.deserialize_portable_artifact(self.context, artifact)
            refuse_lacking_ops(self.module.operation)
            main = main_function(self.module)
            signature = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
            elements = _elements()
            self.arguments = [tensor_type(t, elements, f"argument {i}") for i, t in enumerate(signature.inputs)]
            self.results = [tensor_type(t, elements, f"result {i}") for i, t in enumerate(signature.results)]
            if any(element.read_as != "plain" for _, _, element in self.results):
                with ir.Location.unknown():
                    wrap_for_readable_results(self.module, main, signature)
            self.text = str(self.module)

    def _diagnostic(self, diagnostic) -> bool:
        self.diagnostics.append(str(diagnostic).strip())
        return True

    def __call__(self, *tensors: torch.Tensor) -> list:
        if len(tensors) != len(self.arguments):
            raise StageError(
                "execute", f"{RUNTIME}: the program takes {len(self.arguments)} tensors, {len(tensors)} were given"
            )
        arrays = [
            argument_array(tensor, shape, element, i)
            for i, (tensor, (shape, _, element)) in enumerate(zip(tensors, self.arguments))
        ]
        outputs = guarded("execute", RUNTIME, lambda: self.evaluate(arrays))
        return outputs_as(outputs, self.result_dtypes, RUNTIME)

    def evaluate(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        from jaxlib.mlir import ir
        from jaxlib.mlir.dialects import stablehlo

        with self.context:
            attributes = [
                ir.DenseElementsAttr.get(raw_bytes(array), type=ir.Type.parse(mlir), shape=list(shape))
                for array, (shape, mlir, _) in zip(arrays, self.arguments)
            ]
            self.diagnostics.clear()
            try:
                flat = [np.asarray(value) for value in stablehlo.eval_module(self.module, attributes)]
            except Exception as error:
                said = "; ".join(self.diagnostics) or str(error)
                raise StageError("execute", f"{RUNTIME}: {said}"[:4000], diagnostics=self.diagnostics) from error
        return read_results(flat, [element for _, _, element in self.results])

    def write_native(self, directory: Path, tensors: Sequence[torch.Tensor]) -> str:
        """The program the interpreter evaluates (text, in jaxlib's StableHLO; and the portable
        artifact), the inputs, and run_interp.py (jax only); returns its command."""
        (directory / "program.mlir").write_text(self.text)
        (directory / "program.vhlo.mlirbc").write_bytes(self.artifact)
        for i, tensor in enumerate(tensors):
            np.save(directory / f"input_{i}.npy", to_numpy(tensor))
        kinds = [element.read_as for _, _, element in self.results]
        types = [mlir for _, mlir, _ in self.arguments]
        (directory / "run_interp.py").write_text(
            RUN_INTERP.replace("{types}", repr(types)).replace("{kinds}", repr(kinds))
        )
        return "python run_interp.py"

    def close(self) -> None:
        self.module = None


def main_function(module) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and str(op.attributes["sym_name"]) == '"main"':
            return op
    raise StageError("lower", f"{RUNTIME}: the module has no function @main")


def refuse_lacking_ops(operation) -> None:
    """Stage `lower` fails on the first op the interpreter cannot evaluate (it would abort the process)."""
    name = operation.name
    if name in LACKING or (not name.startswith("stablehlo.") and name not in OTHER_OPS):
        what = "has no implementation of" if name in LACKING else "evaluates only stablehlo and func ops, not"
        raise StageError(
            "lower",
            f"{RUNTIME} (jaxlib's, StableHLO {XLA_STABLEHLO_VERSION}) {what} {name}: it would abort the process "
            f"(`LLVM ERROR`); first at {str(operation.location)[:200]}",
        )
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                refuse_lacking_ops(op.operation)


def tensor_type(type_, elements: dict[str, Element], what: str) -> tuple[list[int], str, Element]:
    """(shape, element type, how it crosses) of a static tensor type of @main's signature."""
    from jaxlib.mlir import ir

    if not isinstance(type_, ir.RankedTensorType) or not type_.has_static_shape:
        raise StageError("lower", f"{RUNTIME} takes static tensors only; @main's {what} is {type_}")
    element = str(type_.element_type)
    if element not in elements:
        raise StageError(
            "lower",
            f"{RUNTIME}: @main's {what} has element type {element}, which this executor does not pass "
            f"(it passes {', '.join(elements)})",
        )
    return list(type_.shape), element, elements[element]


def argument_array(tensor: torch.Tensor, shape: list[int], element: Element, index: int) -> np.ndarray:
    array = to_numpy(tensor)
    if array.dtype != element.numpy or list(array.shape) != shape:
        raise StageError(
            "execute",
            f"{RUNTIME}: argument {index} is {tuple(array.shape)} {array.dtype}; "
            f"the program takes {tuple(shape)} {element.numpy}",
        )
    return array


def raw_bytes(array: np.ndarray) -> np.ndarray:
    """The array's elements as bytes, which DenseElementsAttr reads as the given element type."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def wrap_for_readable_results(module, main, signature) -> None:
    """@main -> @main_as_emitted, private; a new @main calls it and returns each bf16 result
    as its i16 bit pattern (float8: i8) and each complex one as its real and imaginary parts."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func, stablehlo

    main.attributes["sym_name"] = ir.StringAttr.get(WRAPPED_MAIN)
    main.attributes["sym_visibility"] = ir.StringAttr.get("private")
    readable: list[ir.Type] = []
    for type_ in signature.results:
        if _bits_type(type_.element_type) is not None:
            readable.append(ir.RankedTensorType.get(type_.shape, _bits_type(type_.element_type)))
        elif isinstance(type_.element_type, ir.ComplexType):
            part = ir.RankedTensorType.get(type_.shape, type_.element_type.element_type)
            readable += [part, part]
        else:
            readable.append(type_)
    with ir.InsertionPoint(module.body):
        wrapper = func.FuncOp("main", (list(signature.inputs), readable))
        block = wrapper.add_entry_block()
        with ir.InsertionPoint(block):
            call = func.CallOp(list(signature.results), ir.FlatSymbolRefAttr.get(WRAPPED_MAIN), list(block.arguments))
            values = []
            for value in call.results:
                tensor = value.type
                if _bits_type(tensor.element_type) is not None:
                    bits = ir.RankedTensorType.get(tensor.shape, _bits_type(tensor.element_type))
                    values.append(stablehlo.bitcast_convert(bits, value))
                elif isinstance(tensor.element_type, ir.ComplexType):
                    values += [stablehlo.real(value), stablehlo.imag(value)]
                else:
                    values.append(value)
            func.ReturnOp(values)


def read_results(flat: Sequence[np.ndarray], elements: Sequence[Element]) -> list[np.ndarray]:
    """The wrapper's outputs as the program's results (bf16 from bits, complex from parts)."""
    flat, results = list(flat), []
    for element in elements:
        if element.read_as == "complex":
            real, imaginary = flat.pop(0), flat.pop(0)
            value = np.empty(real.shape, element.numpy)
            value.real, value.imag = real, imaginary  # exact: no arithmetic on inf or NaN
            results.append(value)
        elif element.read_as == "bits":
            bits = flat.pop(0)  # np.ascontiguousarray makes a 0-d array 1-d: its shape is given back
            results.append(np.ascontiguousarray(bits).view(element.numpy).reshape(np.shape(bits)))
        else:
            results.append(flat.pop(0))
    return results


RUN_INTERP = '''"""Evaluate program.mlir (StableHLO {version}, as jaxlib's MLIR prints it) on StableHLO's
reference interpreter, as shipped in jaxlib."""
import numpy as np
from jax.interpreters.mlir import make_ir_context
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

TYPES = {types}  # @main's argument element types
KINDS = {kinds}  # per result: plain, bits (bf16 returned as i16, float8 as i8), complex (real, imag)
context = make_ir_context()
stablehlo.register_interpreter_dialect(context)
with context:
    module = ir.Module.parse(open("program.mlir").read())
    inputs = [np.load(f"input_{i}.npy") for i in range(len(TYPES))]
    arguments = [
        ir.DenseElementsAttr.get(np.ascontiguousarray(a).reshape(-1).view(np.uint8), type=ir.Type.parse(t), shape=list(a.shape))
        for a, t in zip(inputs, TYPES)
    ]
    flat = [np.asarray(value) for value in stablehlo.eval_module(module, arguments)]
for i, kind in enumerate(KINDS):
    if kind == "complex":
        real, imaginary = flat.pop(0), flat.pop(0)
        value = np.empty(real.shape, np.complex128 if real.dtype == np.float64 else np.complex64)
        value.real, value.imag = real, imaginary
    elif kind == "bits" and flat[0].dtype.itemsize == 1:
        value = flat.pop(0)  # a float8 value's bits
    elif kind == "bits":
        value = (flat.pop(0).view(np.uint16).astype(np.uint32) << 16).view(np.float32)  # bf16 as the f32 of its bits
    else:
        value = flat.pop(0)
    np.save(f"output_{i}.npy", value)
'''.replace("{version}", XLA_STABLEHLO_VERSION)
