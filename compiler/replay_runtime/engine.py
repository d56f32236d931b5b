"""The reference backend's program: a lowered module in MLIR's ExecutionEngine, called with tensors.

After `refback-munge-calling-conventions` every argument is an unranked memref and
the results come back through one external callback,
`refbackend_consume_func_return_<types>`, which we register with the engine. A tensor's
own memory is passed and results are copied out once (`memref_call`: descriptors built
once per program, results' buffers freed); the table `DTYPES` says which dtypes can
cross, and a dtype not in it is refused with a clear error rather than read back as
wrong values. bf16, float8 and complex<f16> arguments have no memref calling convention
upstream, so bf16 arguments and results cross the boundary as i16 bit patterns, float8
ones as i8, and complex<f16> arguments as i32 (`boundary_as_bits`). f16/bf16 conversions
the JIT-compiled code calls come from `softfloat`, float8 ones from `float8`. The JIT compiles for `target.jit_target()`, not for the host.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch_mlir import ir
from torch_mlir.dialects import arith, linalg
from torch_mlir.dialects import complex as complex_dialect
from torch_mlir.dialects import tensor as tensor_dialect
from torch_mlir.execution_engine import ExecutionEngine

from .codegen import codegen_level
from .memref_call import CallFrame, UnrankedMemRef, ranked_memref_type, read_results
from .mlir import StageError
from .native_output import captured_stderr
from .softfloat import conversion_runtime
from .target import pin


@dataclass(frozen=True)
class DType:
    """How one torch dtype crosses the memref boundary."""

    numpy: np.dtype  # storage dtype of the raw buffer
    mlir: str  # element type in torch-dialect spelling (`!torch.vtensor<[..], X>`)


DTYPES: dict[torch.dtype, DType] = {
    torch.float32: DType(np.dtype(np.float32), "f32"),
    torch.float64: DType(np.dtype(np.float64), "f64"),
    torch.float16: DType(np.dtype(np.float16), "f16"),
    torch.bfloat16: DType(np.dtype(np.int16), "bf16"),  # bit pattern
    torch.bool: DType(np.dtype(np.bool_), "i1"),
    torch.int8: DType(np.dtype(np.int8), "si8"),
    torch.uint8: DType(np.dtype(np.uint8), "ui8"),
    torch.uint16: DType(np.dtype(np.uint16), "ui16"),
    torch.uint32: DType(np.dtype(np.uint32), "ui32"),
    torch.uint64: DType(np.dtype(np.uint64), "ui64"),
    torch.int16: DType(np.dtype(np.int16), "si16"),
    torch.int32: DType(np.dtype(np.int32), "si32"),
    torch.int64: DType(np.dtype(np.int64), "si64"),
    torch.complex64: DType(np.dtype(np.complex64), "complex<f32>"),
    torch.complex128: DType(np.dtype(np.complex128), "complex<f64>"),
    torch.complex32: DType(np.dtype([("real", np.float16), ("imag", np.float16)]), "complex<f16>"),
    torch.float8_e4m3fn: DType(np.dtype(np.uint8), "f8E4M3FN"),
    torch.float8_e4m3fnuz: DType(np.dtype(np.uint8), "f8E4M3FNUZ"),
    torch.float8_e5m2: DType(np.dtype(np.uint8), "f8E5M2"),
    torch.float8_e5m2fnuz: DType(np.dtype(np.uint8), "f8E5M2FNUZ"),
}
TORCH_DTYPE_OF_MLIR = {d.mlir: t for t, d in DTYPES.items()}
# dtypes numpy has no dtype of, -> the torch dtype of their bits (complex32 is a float16 pair)
NUMPY_LESS = {
    torch.bfloat16: torch.int16,
    **{t: torch.uint8 for t in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)},
}
# Element types as builtin IR spells them, signless (`i64`) or signed (`si64`), -> torch dtype.
# Signless integers are read as signed; `ui8` ... `ui64` stay unsigned.
ELEMENT_DTYPES = {
    **{d.mlir.removeprefix("s"): t for t, d in DTYPES.items() if not d.mlir.startswith(("ui", "complex"))},
    **{d.mlir: t for t, d in DTYPES.items() if not d.mlir.startswith("complex")},
}

# Scalar results (`!torch.int`, `!torch.float`, `!torch.bool` returned from @main) come
# back by value, as the C type of their builtin type (i64, f64, i1).
SCALAR_RESULTS: dict[type, type] = {int: ctypes.c_int64, float: ctypes.c_double, bool: ctypes.c_bool}
ResultType = torch.dtype | type  # a tensor's dtype, or int / float / bool


class UnsupportedDType(TypeError):
    pass


def dtype_spec(dtype: torch.dtype) -> DType:
    try:
        return DTYPES[dtype]
    except KeyError:
        supported = ", ".join(str(d).removeprefix("torch.") for d in DTYPES)
        raise UnsupportedDType(f"the reference backend cannot pass {dtype} tensors (supported: {supported})") from None


# --- memref descriptors ----------------------------------------------------------


def to_storage_array(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's data as a C-contiguous numpy array of its storage dtype: numpy has no
    bfloat16, float8 or complex32, so bf16 is stored as its int16 bits, float8 as its uint8
    bits, complex32 as (real, imag) pairs of float16."""
    spec = dtype_spec(tensor.dtype)
    tensor = tensor.detach().cpu().contiguous()
    shape = tuple(tensor.shape)
    if tensor.dtype == torch.complex32:
        tensor = torch.view_as_real(tensor)
    elif tensor.dtype in NUMPY_LESS:
        tensor = tensor.view(NUMPY_LESS[tensor.dtype])
    # np.ascontiguousarray makes a 0-d array 1-d: the shape is given back.
    return np.ascontiguousarray(tensor.numpy()).view(spec.numpy).reshape(shape)


def from_storage_array(array: np.ndarray, dtype: torch.dtype | None) -> torch.Tensor:
    """`to_storage_array`'s inverse: a bf16 or float8 value comes back from its bits (given
    `dtype`), a complex32 one from its float16 pair."""
    array = np.require(array, requirements="C")
    if array.dtype == DTYPES[torch.complex32].numpy:
        pairs = array.reshape(-1).view(np.float16).reshape(array.shape + (2,))  # a 0-d array cannot change itemsize
        return torch.view_as_complex(torch.from_numpy(pairs))
    tensor = torch.from_numpy(array)
    if dtype in NUMPY_LESS and tensor.dtype == NUMPY_LESS[dtype]:
        return tensor.view(dtype)
    return tensor


def memref_view(unranked: UnrankedMemRef, storage: np.dtype) -> np.ndarray:
    """A numpy view (no copy) of the memory a memref descriptor describes."""
    rank = unranked.rank
    descriptor = ctypes.cast(unranked.descriptor, ctypes.POINTER(ranked_memref_type(rank))).contents
    shape = tuple(descriptor.shape) if rank else ()
    strides = tuple(descriptor.strides) if rank else ()
    if any(n == 0 for n in shape):
        return np.empty(shape, storage)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    address = descriptor.aligned + descriptor.offset * storage.itemsize
    raw = (ctypes.c_byte * (extent * storage.itemsize)).from_address(address)
    flat = np.frombuffer(raw, dtype=storage)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=[s * storage.itemsize for s in strides])


@ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(UnrankedMemRef), ctypes.POINTER(UnrankedMemRef))
def _memref_copy(element_size, source, target):
    """`memrefCopy` of MLIR's C runner utils, which the wheel does not ship.

    `finalize-memref-to-llvm` calls it for copies between non-identity layouts.
    """
    element = np.dtype((np.void, element_size))
    np.copyto(memref_view(target.contents, element), memref_view(source.contents, element))


# --- the boundary rewrite: types the calling convention does not take ----------------

# Element types `refback-munge-calling-conventions` refuses for an argument ("argument
# must be a memref of f16, f32, f64, i1, i8, i16, i32, i64, c32, c64"), and the integer
# whose bits they cross as. (It takes any result; bf16 and float8 results cross as bits too,
# one rule for both directions.)
BITS_OF_FLOAT = {"bf16": 16, "f8E4M3FN": 8, "f8E4M3FNUZ": 8, "f8E5M2": 8, "f8E5M2FNUZ": 8}
COMPLEX_F16 = "complex<f16>"  # an argument crosses as i32: the real part in its low half


def boundary_as_bits(module: ir.Module) -> None:
    """Make every tensor argument and result of every function whose element type the calling
    convention refuses cross as integer bits: bf16 as i16 and float8 as i8 (`arith.bitcast`
    at entry and before return), a complex<f16> argument as i32 (its two f16 halves put
    together at entry by a `linalg.generic`). The body is unchanged."""
    with module.context, ir.Location.unknown():

        def as_bits(t: ir.Type, argument: bool) -> ir.Type | None:
            if not isinstance(t, ir.RankedTensorType):
                return None
            element = str(t.element_type)
            if element in BITS_OF_FLOAT:
                width = BITS_OF_FLOAT[element]
            elif argument and element == COMPLEX_F16:
                width = 32
            else:
                return None
            # What the rewrite builds: loaded, where the IR did not load it (an op built
            # from Python in a context without its dialect is an unregistered op).
            for dialect in ("arith", "tensor", "linalg", "complex"):
                module.context.dialects[dialect]
            return ir.RankedTensorType.get(t.shape, ir.IntegerType.get_signless(width))

        def from_bits(value: ir.Value, old_type: ir.RankedTensorType) -> ir.Value:
            if str(old_type.element_type) == COMPLEX_F16:
                return _complex_f16_of_bits(value, old_type)
            return arith.BitcastOp(old_type, value).result

        for op in module.body.operations:
            if op.operation.name != "func.func" or not op.regions[0].blocks:
                continue
            entry = op.regions[0].blocks[0]
            function_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            inputs, results = list(function_type.inputs), list(function_type.results)
            for i, argument in enumerate(entry.arguments):
                new_type = as_bits(argument.type, argument=True)
                if new_type is None:
                    continue
                old_type = argument.type
                uses = [(use.owner, use.operand_number) for use in argument.uses]
                argument.set_type(new_type)
                with ir.InsertionPoint.at_block_begin(entry):
                    value = from_bits(argument, old_type)
                for user, operand in uses:
                    user.operands[operand] = value
                inputs[i] = new_type
            for block in op.regions[0].blocks:
                terminator = block.operations[len(block.operations) - 1]
                if terminator.operation.name != "func.return":
                    continue
                for i, value in enumerate(terminator.operands):
                    new_type = as_bits(value.type, argument=False)
                    if new_type is None:
                        continue
                    with ir.InsertionPoint(terminator):
                        terminator.operands[i] = arith.BitcastOp(new_type, value).result
                    results[i] = new_type
            op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _complex_f16_of_bits(bits: ir.Value, complex_type: ir.RankedTensorType) -> ir.Value:
    """tensor<...xi32> -> tensor<...xcomplex<f16>>, element by element: the low 16 bits are
    the real part, the high 16 the imaginary part (complex<f16>'s memory on x86-64)."""
    i16, i32, f16 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32), ir.F16Type.get()
    sizes = [
        tensor_dialect.DimOp(bits, arith.ConstantOp(ir.IndexType.get(), d).result).result
        if ir.ShapedType.is_dynamic_size(size)
        else size
        for d, size in enumerate(complex_type.shape)
    ]
    empty = tensor_dialect.EmptyOp(sizes, complex_type.element_type)
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(complex_type.rank))
    generic = linalg.GenericOp(
        [complex_type],
        [bits],
        [empty.result],
        ir.ArrayAttr.get([identity, identity]),
        ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * complex_type.rank),
    )
    body = generic.regions[0].blocks.append(i32, complex_type.element_type)
    with ir.InsertionPoint(body):
        word = body.arguments[0]
        real = arith.BitcastOp(f16, arith.TruncIOp(i16, word).result).result
        high = arith.ShRUIOp(word, arith.ConstantOp(i32, 16).result).result
        imaginary = arith.BitcastOp(f16, arith.TruncIOp(i16, high).result).result
        linalg.YieldOp([complex_dialect.CreateOp(complex_type.element_type, real, imaginary).result])
    return generic.result


# --- what a program was compiled for ---------------------------------------------------


@dataclass(frozen=True)
class ArgumentType:
    """One tensor argument as compiled: dims (None where dynamic) and element type."""

    dims: tuple[int | None, ...]
    element: str  # builtin spelling, e.g. "f32", "i64" (signless), "i1"

    def text(self) -> str:
        return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in self.dims) + f"{self.element}>"


def _signless(element: str) -> str:
    return element[1:] if element[:2] in ("si", "ui") else element


def _builtin_element(dtype: torch.dtype) -> str | None:
    spec = DTYPES.get(dtype)
    if spec is None:
        return None
    # Backend IR is signless (si64 and ui8 are i64 and i8 in linalg; StableHLO keeps ui8).
    return _signless(spec.mlir)


def argument_types(module: ir.Module, entry: str = "main") -> list[ArgumentType | None] | None:
    """The tensor arguments of `entry` in backend IR (before lowering); None per non-tensor."""
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
            types = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).inputs
            return [
                ArgumentType(
                    tuple(None if ir.ShapedType.is_dynamic_size(n) else n for n in t.shape), str(t.element_type)
                )
                if isinstance(t, ir.RankedTensorType)
                else None
                for t in types
            ]
    return None


def check_arguments(expected: Sequence[ArgumentType | None], tensors: Sequence[torch.Tensor]) -> None:
    """Refuse arguments the program was not compiled for: count, rank, static dims, dtype."""
    if len(tensors) != len(expected):
        raise StageError("execute", f"the program takes {len(expected)} tensors, {len(tensors)} were given")
    for i, (compiled, tensor) in enumerate(zip(expected, tensors)):
        if compiled is None:
            continue
        problems = []
        if _builtin_element(tensor.dtype) != _signless(compiled.element):
            problems.append(f"element type {compiled.element} expected")
        if tensor.dim() != len(compiled.dims):
            problems.append(f"rank {len(compiled.dims)} expected")
        else:
            problems += [
                f"dim {d} is static {want}"
                for d, (want, size) in enumerate(zip(compiled.dims, tensor.shape))
                if want is not None and want != size
            ]
        if problems:
            given = f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}"
            hint = " (compile with that dim dynamic to call it at other sizes)" if "static" in problems[-1] else ""
            raise StageError(
                "execute",
                f"argument {i} is {given} but the program was compiled for {compiled.text()}: "
                + "; ".join(problems)
                + hint,
            )


# --- the program ------------------------------------------------------------------


_CONSUME_PREFIX = "refbackend_consume_func_return_"


def _check_result_dtypes(result_dtypes: Sequence[ResultType]) -> None:
    for dtype in result_dtypes:
        if dtype not in SCALAR_RESULTS:
            dtype_spec(dtype)  # raises UnsupportedDType


def _return_callbacks(module: ir.Module, entries: Sequence[str]) -> dict[str, str | None]:
    """The callback each entry returns its results through (`refback-munge-calling-conventions`
    names one per list of result types), None for an entry without results. A module of
    one entry declares at most one; in a module of several, each entry's body is read."""
    declared = [
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module.body.operations
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value.startswith(_CONSUME_PREFIX)
    ]
    if len(entries) == 1 or len(declared) <= 1:
        return dict.fromkeys(entries, declared[0] if declared else None)
    wanted = set(entries)
    callbacks: dict[str, str | None] = dict.fromkeys(entries)
    for op in module.body.operations:
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else ""
        if name not in wanted:
            continue

        def find(inner: ir.Operation, entry: str = name) -> ir.WalkResult:
            if inner.name == "llvm.call" and "callee" in inner.attributes:
                callee = ir.FlatSymbolRefAttr(inner.attributes["callee"]).value
                if callee.startswith(_CONSUME_PREFIX):
                    callbacks[entry] = callee
                    return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        op.walk(find)
    return callbacks


class _Engine:
    """One lowered module in an ExecutionEngine, shared by the programs that are its entries.

    Results come back through callbacks named by their types (`_return_callbacks`); entries
    with the same result types share one. The entry being called sets itself as `calling`,
    and each callback hands its values to it. Every entry is compiled and linked here, so
    a module that cannot load fails at once, with the JIT's reason, rather than at its
    first call as `Unknown function main`."""

    def __init__(self, llvm_module: ir.Module, entries: dict[str, Sequence[ResultType]], opt_level: int):
        callbacks = _return_callbacks(llvm_module, list(entries))
        self.calling: RefBackendProgram | None = None
        self._callbacks = {}
        for entry, name in callbacks.items():
            if name is not None and name not in self._callbacks:
                # Tensor results arrive as `UnrankedMemRef *`, taken as plain addresses.
                prototype = ctypes.CFUNCTYPE(None, *[SCALAR_RESULTS.get(d, ctypes.c_void_p) for d in entries[entry]])
                self._callbacks[name] = prototype(self._consume)
        pin(llvm_module)  # compiled for the chosen JIT target, not for this host (target.py)
        with codegen_level(opt_level), captured_stderr() as jit_output:
            self.engine = ExecutionEngine(llvm_module, opt_level=opt_level, shared_libs=[])
            self.engine.raw_register_runtime("memrefCopy", ctypes.cast(_memref_copy, ctypes.c_void_p))
            conversion_runtime().register(self.engine)
            for name, callback in self._callbacks.items():
                self.engine.register_runtime(name, callback)
            addresses = {entry: self.engine.raw_lookup("_mlir_ciface_" + entry) for entry in entries}
        for entry, address in addresses.items():
            if not address:
                reason = "; ".join(jit_output.lines()) or "no reason printed"
                raise StageError("lower", f"the JIT could not load @{entry}: {reason}")
        # The packed interface, `void (void **arguments)`, called directly: what
        # `ExecutionEngine.invoke` does, without its lookup and argument packing per call.
        self.functions = {entry: ctypes.CFUNCTYPE(None, ctypes.c_void_p)(a) for entry, a in addresses.items()}

    def _consume(self, *values) -> None:
        self.calling._consume(*values)


class RefBackendProgram:
    """A lowered module loaded into an ExecutionEngine, callable with torch tensors; or one
    entry of a module several programs share (`sharing_one_engine`)."""

    def __init__(
        self,
        llvm_module: ir.Module,
        result_dtypes: Sequence[ResultType],
        *,
        entry: str = "main",
        opt_level: int = 0,
        argument_types: Sequence[ArgumentType | None] | None = None,
    ):
        _check_result_dtypes(result_dtypes)
        self._attach(_Engine(llvm_module, {entry: result_dtypes}, opt_level), entry, result_dtypes, argument_types)

    @classmethod
    def sharing_one_engine(
        cls,
        llvm_module: ir.Module,
        entries: Sequence[tuple[str, Sequence[ResultType], Sequence[ArgumentType | None] | None]],
        *,
        opt_level: int = 0,
    ) -> list["RefBackendProgram"]:
        """One program per (entry, result dtypes, argument types) of `llvm_module`, JIT-compiled
        together: one engine's fixed cost for all (the `eager` config's ops of one test)."""
        for _, result_dtypes, _ in entries:
            _check_result_dtypes(result_dtypes)
        engine = _Engine(llvm_module, {entry: dtypes for entry, dtypes, _ in entries}, opt_level)
        programs = []
        for entry, result_dtypes, argument_types in entries:
            program = cls.__new__(cls)
            program._attach(engine, entry, result_dtypes, argument_types)
            programs.append(program)
        return programs

    def _attach(
        self,
        engine: _Engine,
        entry: str,
        result_dtypes: Sequence[ResultType],
        argument_types: Sequence[ArgumentType | None] | None,
    ) -> None:
        self.entry = entry
        self.result_dtypes = list(result_dtypes)
        # What the program was compiled for (from backend IR); None: not checked.
        self.argument_types = None if argument_types is None else list(argument_types)
        self._results: list[torch.Tensor | int | float | bool] = []
        self._engine = engine
        self._function = engine.functions[entry]
        self._frame = CallFrame()
        self._tensor_results = [i for i, d in enumerate(self.result_dtypes) if d not in SCALAR_RESULTS]
        self._tensor_dtypes = [self.result_dtypes[i] for i in self._tensor_results]
        self._all_tensors = len(self._tensor_results) == len(self.result_dtypes)

    def _consume(self, *values) -> None:
        if self._all_tensors:
            self._results = read_results(values, self.result_dtypes, self._frame.pointers)
            return
        tensors = iter(
            read_results([values[i] for i in self._tensor_results], self._tensor_dtypes, self._frame.pointers)
        )
        self._results = [d(v) if d in SCALAR_RESULTS else next(tensors) for v, d in zip(values, self.result_dtypes)]

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor | int | float | bool]:
        if self.argument_types is not None:
            check_arguments(self.argument_types, tensors)
        return self.call_checked(tensors)

    def call_checked(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor | int | float | bool]:
        """Call with `tensors` known to match what the program was compiled for (dtypes,
        ranks, static dims), e.g. by a cache keyed on them: no argument check."""
        if self._engine is None:
            raise RuntimeError("this program was closed")
        for tensor in tensors:
            if tensor.dtype not in DTYPES:
                dtype_spec(tensor.dtype)  # raises UnsupportedDType
        passed = self._frame.fill(tensors)  # alive until the call returns
        self._results = []
        self._engine.calling = self
        try:
            self._function(self._frame.packed)
        except Exception as error:
            raise StageError("execute", f"{type(error).__name__}: {error}") from error
        finally:
            self._engine.calling = None
        del passed
        results, self._results = self._results, []
        return results

    def close(self) -> None:
        """Release the JIT-compiled code now rather than at garbage collection."""
        self._engine = None
        self._function = None
