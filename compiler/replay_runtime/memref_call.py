"""Calling a lowered program with torch tensors, without copies: call descriptors.

A program's arguments are `**UnrankedMemRef` in a packed array (`void **`). `CallFrame`
keeps, per argument, the ctypes objects that describe it (a ranked descriptor, the
unranked memref that points to it, the pointer to that) and the packed array itself,
built once per program and reused: a call writes each tensor's data pointer into its
descriptor, and its sizes and strides only when they changed. The tensor's own memory
is passed (made contiguous first if it is not), so nothing is copied on the way in.

Results come back to the return callback as memrefs the program allocated with
`malloc`. `read_result` copies each into a new torch tensor with one `memmove` and
frees the buffer when the program owns it: not an argument's memory (a result may alias
its input) and not a global constant (`memref.get_global` gives the sentinel
0xdeadbeef as its allocated pointer).
"""

from __future__ import annotations

import ctypes
import math
from typing import Sequence

import torch

# `memref.get_global`'s allocated pointer: a constant, never freed.
GLOBAL_SENTINEL = 0xDEADBEEF
_free = ctypes.CDLL(None).free
_free.argtypes = [ctypes.c_void_p]
_free.restype = None


class UnrankedMemRef(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int64), ("descriptor", ctypes.c_void_p)]


_RANKED_CACHE: dict[int, type] = {}


def ranked_memref_type(rank: int) -> type:
    """ctypes struct of a ranked memref descriptor (pointer fields as void*)."""
    if rank not in _RANKED_CACHE:
        fields = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
        ]
        if rank:
            fields += [("shape", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        _RANKED_CACHE[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return _RANKED_CACHE[rank]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements, as an identity-layout memref has them."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class ArgumentSlot:
    """The ctypes objects passing one argument: descriptor <- unranked memref <- pointer."""

    __slots__ = ("rank", "shape", "descriptor", "unranked", "pointer")

    def __init__(self, rank: int):
        self.rank = rank
        self.shape: tuple[int, ...] | None = None  # sizes written into the descriptor
        self.descriptor = ranked_memref_type(rank)()
        self.unranked = UnrankedMemRef(rank, ctypes.addressof(self.descriptor))
        self.pointer = ctypes.c_void_p(ctypes.addressof(self.unranked))

    def set_shape(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        if self.rank:
            self.descriptor.shape[:] = shape
            self.descriptor.strides[:] = contiguous_strides(shape)


class CallFrame:
    """The packed argument array of a program and a slot per argument, reused across calls."""

    def __init__(self) -> None:
        self.slots: list[ArgumentSlot] = []
        self.packed = (ctypes.c_void_p * 0)()
        self.pointers: list[int] = []  # the data pointers of the call under way: results may alias them

    def fill(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Point the descriptors at `tensors`' memory; returns the tensors passed (the
        contiguous ones made for non-contiguous inputs), which must outlive the call."""
        if len(tensors) != len(self.slots):
            self._resize(len(tensors))
        passed, pointers = [], []
        for i, (tensor, slot) in enumerate(zip(tensors, self.slots)):
            if not tensor.is_contiguous() or tensor.is_conj() or tensor.is_neg():
                tensor = tensor.resolve_conj().resolve_neg().contiguous()
            shape = tensor.shape
            if shape != slot.shape:
                if len(shape) != slot.rank:
                    slot = self.slots[i] = ArgumentSlot(len(shape))
                    self.packed[i] = ctypes.addressof(slot.pointer)
                slot.set_shape(tuple(shape))
            descriptor = slot.descriptor
            descriptor.allocated = descriptor.aligned = pointer = tensor.data_ptr()
            passed.append(tensor)
            pointers.append(pointer)
        self.pointers = pointers
        return passed

    def _resize(self, count: int) -> None:
        self.slots = [ArgumentSlot(0) for _ in range(count)]
        self.packed = (ctypes.c_void_p * count)(*(ctypes.addressof(s.pointer) for s in self.slots))


def read_results(addresses: Sequence[int], dtypes: Sequence[torch.dtype], passed: Sequence[int]) -> list[torch.Tensor]:
    """New tensors holding the returned memrefs (`UnrankedMemRef *` addresses); frees
    each buffer the program owns (not one of the `passed` data pointers), once, after
    every result is read."""
    owned: set[int] = set()
    results = []
    for address, dtype in zip(addresses, dtypes):
        unranked = UnrankedMemRef.from_address(address)
        descriptor = ranked_memref_type(unranked.rank).from_address(unranked.descriptor)
        results.append(_copy_out(unranked, descriptor, dtype))
        allocated = descriptor.allocated
        if allocated and allocated != GLOBAL_SENTINEL and allocated not in passed:
            owned.add(allocated)
    for allocated in owned:
        _free(allocated)
    return results


def _copy_out(unranked: UnrankedMemRef, descriptor: ctypes.Structure, dtype: torch.dtype) -> torch.Tensor:
    shape = tuple(descriptor.shape) if unranked.rank else ()
    strides = tuple(descriptor.strides) if unranked.rank else ()
    result = torch.empty(shape, dtype=dtype)
    count = math.prod(shape)
    if count == 0:
        return result
    itemsize = result.element_size()
    start = descriptor.aligned + descriptor.offset * itemsize
    if count == 1 or strides == result.stride():
        ctypes.memmove(result.data_ptr(), start, count * itemsize)
        return result
    # A strided result (a view the program returned): copied element by element.
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    memory = torch.frombuffer((ctypes.c_byte * (extent * itemsize)).from_address(start), dtype=dtype)
    return result.copy_(memory.as_strided(shape, strides))
