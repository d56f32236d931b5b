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
torch's own code runs unchanged, only cheaper. It caches, by the same count, how the
table splits into the CIA ops to override and the rest
(`_split_decomp_table_to_cia_and_python_decomp`: ~900 entries, each op's schema checked,
23 ms a call), per table content.

What remained of the second, the registering itself (~11,000 `py_impl` calls, ~6,000
new closures, ~500 fake-tensor rules: 65 ms of a 106 ms `run_decompositions` on a
two-op program), is replayed: `_ReplayedOverride` runs torch's own override once per
table and records what it left on each op, then sets the same kernels directly as long
as the ops' kernels are still what torch's code saw. `tests/test_decompose.py` checks
that the decomposed graphs, and every op's kernels after the call, are the same with
and without.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch._ops
import torch.export.exported_program as exported_program
from torch._subclasses import fake_impls
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


def _split_cached_by_op_count(split):
    """`split(table)` once per table content and op count (the last one asked: one table in
    practice, torch-mlir's). torch's split deletes the CIA ops from the table it is given
    and returns that table as the second part: here the caller gets new dicts with the same
    entries, from a split of a copy."""

    @functools.wraps(split)
    def cached(decomp_table: dict):
        key = (_op_count(), tuple(decomp_table.items()))  # compared, not hashed: any entry goes
        if key != cached.key:
            cached.value, cached.key = split(dict(decomp_table)), key
        cia_to_decomp, python_decomp_table = cached.value
        return dict(cia_to_decomp), dict(python_decomp_table)

    cached.key, cached.value = None, None
    return cached


class _ReplayedOverride:
    """torch's `_override_composite_implicit_decomp(cia_to_decomp)`, recorded and replayed.

    Entering it gives each op of `cia_to_decomp` Python kernels that depend only on the
    op's kernels at entry and on the table; exiting it puts back the kernels it saw and
    drops the op's fake-tensor rule. A recording holds, for one table, each op's kernels
    and whether it had a fake rule before torch's code ran, and what it left after. It
    is replayed when every op is as recorded before; otherwise torch's code runs and is
    recorded again (the first exit drops fake rules torch had registered itself, so the
    second call records once more, and later calls replay).
    """

    def __init__(self, original):
        self.original = original
        self.key: tuple | None = None
        self.before: dict = {}  # op -> (kernels, had a fake rule)
        self.after: dict = {}  # op -> (kernels, the fake rule torch registered or None)
        self.replays = 0

    def _state(self, ops) -> dict:
        return {op: (dict(op.py_kernels), op in fake_impls.op_implementations_dict) for op in ops}

    @contextlib.contextmanager
    def __call__(self, cia_to_decomp: dict):
        key = tuple(cia_to_decomp.items())
        if key == self.key and self._state(cia_to_decomp) == self.before:
            self.replays += 1
            yield from self._replay()
            return
        before = self._state(cia_to_decomp)
        with self.original(cia_to_decomp):
            self.key, self.before = key, before
            self.after = {
                op: (dict(op.py_kernels), None if had_rule else fake_impls.op_implementations_dict.get(op))
                for op, (_, had_rule) in before.items()
            }
            yield

    def _replay(self):
        for op, (kernels, rule) in self.after.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()
            if rule is not None:
                fake_impls.op_implementations_dict[op] = rule
        try:
            yield
        finally:
            for op, (kernels, _) in self.before.items():
                op.py_kernels.clear()
                op.py_kernels.update(kernels)
                op._dispatch_cache.clear()
                fake_impls._deregister_op_impl(op)


_ORIGINAL = {
    "callable": torch._ops.Callable,
    "collect": exported_program._collect_all_valid_cia_ops,
    "split": exported_program._split_decomp_table_to_cia_and_python_decomp,
    "override": exported_program._override_composite_implicit_decomp,
}


def install() -> None:
    """Make later `run_decompositions` calls cheap (idempotent; `uninstall` undoes it)."""
    torch._ops.Callable = _Callable
    if exported_program._collect_all_valid_cia_ops is _ORIGINAL["collect"]:
        exported_program._collect_all_valid_cia_ops = _cached_by_op_count(_ORIGINAL["collect"])
    if exported_program._split_decomp_table_to_cia_and_python_decomp is _ORIGINAL["split"]:
        exported_program._split_decomp_table_to_cia_and_python_decomp = _split_cached_by_op_count(_ORIGINAL["split"])
    if exported_program._override_composite_implicit_decomp is _ORIGINAL["override"]:
        exported_program._override_composite_implicit_decomp = _ReplayedOverride(_ORIGINAL["override"])


def uninstall() -> None:
    torch._ops.Callable = _ORIGINAL["callable"]
    exported_program._collect_all_valid_cia_ops = _ORIGINAL["collect"]
    exported_program._split_decomp_table_to_cia_and_python_decomp = _ORIGINAL["split"]
    exported_program._override_composite_implicit_decomp = _ORIGINAL["override"]


def run_decompositions(program: ExportedProgram, table: dict) -> ExportedProgram:
    """`program.run_decompositions(table)`, with the fixed costs above removed."""
    install()
    return program.run_decompositions(table)
