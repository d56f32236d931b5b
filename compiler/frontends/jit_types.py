"""Torch-dialect spellings of TorchScript types, tensor types and literals (for the JIT IR importer)."""

from __future__ import annotations

import math
import struct
from typing import Sequence

import torch

from compiler.refbackend import DTYPES
from compiler.stages import StageError

SCALAR_TYPES = {
    "IntType": "int",
    "SymIntType": "int",
    "ScalarTypeType": "int",
    "LayoutType": "int",
    "MemoryFormatType": "int",
    "FloatType": "float",
    "SymFloatType": "float",
    "BoolType": "bool",
    "SymBoolType": "bool",
    "StringType": "str",
    "NoneType": "none",
    "DeviceObjType": "Device",
    "NumberType": "number",
    "GeneratorType": "Generator",
    "AnyType": "any",
    "TensorType": "tensor",
}


def type_body(jit_type: torch._C.JitType) -> str:
    """The torch-dialect type without its `!torch.` prefix (as nested in list<...>)."""
    kind = jit_type.kind()
    if kind in SCALAR_TYPES:
        return SCALAR_TYPES[kind]
    if kind == "ListType":
        return f"list<{type_body(jit_type.getElementType())}>"
    if kind == "OptionalType":
        return f"optional<{type_body(jit_type.getElementType())}>"
    if kind == "TupleType":
        return "tuple<" + ", ".join(type_body(t) for t in jit_type.elements()) + ">"
    if kind == "UnionType":
        return "union<" + ", ".join(type_body(t) for t in jit_type.containedTypes()) + ">"
    if kind == "DictType":
        return f"dict<{type_body(jit_type.getKeyType())}, {type_body(jit_type.getValueType())}>"
    raise StageError("import", f"JIT type {jit_type} ({kind}) has no torch-dialect equivalent")


def mlir_type(jit_type: torch._C.JitType) -> str:
    return "!torch." + type_body(jit_type)


def recorded_type(jit_type: torch._C.JitType) -> str:
    """`mlir_type`, keeping what a trace recorded on a tensor: `!torch.tensor<[2,8],f32>`.

    A traced graph knows every tensor's sizes and dtype; dropping them leaves unranked
    tensors that torch-mlir's shape refinement cannot always recover (and some of its
    passes crash on). Scripted graphs record neither, and stay `!torch.tensor`.
    """
    if jit_type.kind() == "TensorType":
        sizes, dtype = jit_type.sizes(), jit_type.dtype()
        if sizes is not None and all(isinstance(n, int) for n in sizes) and dtype in DTYPES:
            return f"!torch.tensor<[{','.join(map(str, sizes))}],{DTYPES[dtype].mlir}>"
    return mlir_type(jit_type)


def value_tensor_type(shape: Sequence[int], dtype: torch.dtype) -> str:
    dims = ",".join("?" if d < 0 else str(d) for d in shape)
    return f"!torch.vtensor<[{dims}],{element_type(dtype)}>"


def element_type(dtype: torch.dtype) -> str:
    if dtype not in DTYPES:
        raise StageError("import", f"no torch-dialect element type for {dtype}")
    return DTYPES[dtype].mlir


def builtin_tensor_type(shape: Sequence[int], dtype: torch.dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element_type(dtype) + ">"


def string_literal(text: str) -> str:
    escaped = "".join(
        ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "".join(f"\\{b:02X}" for b in ch.encode()) for ch in text
    )
    return f'"{escaped}"'


def float_literal(value: float) -> str:
    if math.isfinite(value):
        text = repr(float(value))  # MLIR wants a '.' in a float literal: 1e-05 -> 1.0e-05
        mantissa, e, exponent = text.partition("e")
        return (mantissa if "." in mantissa else mantissa + ".0") + e + exponent
    return "0x" + struct.pack(">d", value).hex().upper()  # nan/inf as bit patterns
