"""torch-mlir's decompositions on an ExportedProgram, without torch's fixed cost per call.

`ExportedProgram.run_decompositions(table)` with torch-mlir's table keeps every other
CompositeImplicitAutograd (CIA) op whole, and pays for that on every call, whatever the
program's size (torch 2.13, measured on a two-op program: 283 ms of which ~60 ms trace):

- it walks the dispatcher for the ~500 preservable CIA ops (~80 ms), a set that only
  changes when ops are registered;
- it registers, then removes, Python kernels on those ops: ~5,700 `py_impl` calls, and
  each one evaluates the annotations of its inner function, two
  `collections.abc.Callable[...]` subscriptions (~130 ms).

`install` caches the first by the dispatcher's op count, and gives `torch._ops` a
`Callable` whose subscription is free and whose isinstance check is `callable()`, so
torch's own code runs unchanged, only cheaper. `tests/test_decompose.py` checks that the
decomposed graphs are the same with and without.
"""

from __future__ import annotations

import functools

import torch
import torch._ops
import torch.export.exported_program as exported_program
from torch.export import ExportedProgram


class _CallableMeta(type):
    def __instancecheck__(cls, value: object) -> bool:
        return callable(value)

    def __getitem__(cls, _parameters: object) -> type:
        return cls


class _Callable(metaclass=_CallableMeta):
    """`collections.abc.Callable` for torch._ops' run-time annotations and its one isinstance check."""


def _op_count() -> int:
    return len(torch._C._dispatch_get_all_op_names())


def _cached_by_op_count(collect):
    @functools.wraps(collect)
    def cached():
        count = _op_count()
        if cached.key != count:
            cached.value, cached.key = collect(), count
        return cached.value

    cached.key, cached.value = None, None
    return cached


_ORIGINAL = {"callable": torch._ops.Callable, "collect": exported_program._collect_all_valid_cia_ops}


def install() -> None:
    """Make later `run_decompositions` calls cheap (idempotent; `uninstall` undoes it)."""
    torch._ops.Callable = _Callable
    if exported_program._collect_all_valid_cia_ops is _ORIGINAL["collect"]:
        exported_program._collect_all_valid_cia_ops = _cached_by_op_count(_ORIGINAL["collect"])


def uninstall() -> None:
    torch._ops.Callable = _ORIGINAL["callable"]
    exported_program._collect_all_valid_cia_ops = _ORIGINAL["collect"]


def run_decompositions(program: ExportedProgram, table: dict) -> ExportedProgram:
    """`program.run_decompositions(table)`, with the fixed costs above removed."""
    install()
    return program.run_decompositions(table)
