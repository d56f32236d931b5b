"""Tie contracts: which index an op may return among equal values, from torch's own docs.

A boundary program (`e2e.generate.boundary`) has ties, and an op that returns indices
then has to pick one of several equal values. Where its documentation fixes the choice
(argmax: "the indices of the first maximal value are returned"), another index is a wrong
result. Where it leaves it open (topk: "the indices of tied elements are not guaranteed to
be stable"), every index of an equal value is right, and torch's is only one of them: the
judge (`TieJudge`) accepts a compiled index tensor that selects the same values, and
nothing else. The grower never lets another op read an open contract's result (what it
would compute from an index depends on the choice), so every such result is an output of
its program, and judged here alone.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import torch
import torch.utils._pytree as pytree

from e2e.framework.compare import compare_values
from e2e.framework.trace import Trace


class Rule(Enum):
    FIRST = "first"  # the documentation fixes the index among equal values (the first, in order)
    ANY = "any"  # the documentation leaves it open: any index of an equal value


class Selects(Enum):
    ONE = "one"  # one index a row: of the chosen value (max, median, kthvalue)
    ORDER = "order"  # distinct indices a row, in the order of their values (sort, topk)


@dataclass(frozen=True)
class TieContract:
    op: str  # the op of the catalogue (`e2e.generate.ops`)
    torch_op: str  # the documented torch function, as called
    rule: Rule
    selects: Selects
    doc: str  # the torch function whose docstring (torch 2.13) says it: `torch.<doc>.__doc__`
    documented: str  # what it says, verbatim (markup and line breaks dropped: `doc_text`)


def doc_text(name: str) -> str:
    """`torch.<name>`'s docstring as prose: `:attr:`/`:func:` roles and backquotes
    dropped, whitespace folded (what `TieContract.documented` quotes)."""
    text = re.sub(r":(?:attr|func|class|ref):`([^`]*)`", r"\1", getattr(torch, name).__doc__ or "")
    return " ".join(text.replace("`", "").split())


TIE_CONTRACTS: dict[str, TieContract] = {
    c.op: c
    for c in (
        TieContract(
            "argmax",
            "torch.argmax(input, dim)",
            Rule.FIRST,
            Selects.ONE,
            "argmax",
            "If there are multiple maximal values then the indices of the first maximal value are returned.",
        ),
        TieContract(
            "argmin",
            "torch.argmin(input, dim)",
            Rule.FIRST,
            Selects.ONE,
            "argmin",
            "If there are multiple minimal values then the indices of the first minimal value are returned.",
        ),
        TieContract(
            "max_dim_indices",
            "torch.max(input, dim).indices",
            Rule.FIRST,
            Selects.ONE,
            "max",
            "If there are multiple maximal values in a reduced row then the indices of the first maximal value "
            "are returned.",
        ),
        TieContract(
            "min_dim_indices",
            "torch.min(input, dim).indices",
            Rule.FIRST,
            Selects.ONE,
            "min",
            "If there are multiple minimal values in a reduced row then the indices of the first minimal value "
            "are returned.",
        ),
        TieContract(
            "sort_stable_indices",
            "torch.sort(input, dim, stable=True).indices",
            Rule.FIRST,
            Selects.ORDER,
            "sort",
            "If stable is True then the sorting routine becomes stable, preserving the order of equivalent elements.",
        ),
        TieContract(
            "sort_indices",
            "torch.sort(input, dim).indices (stable=False)",
            Rule.ANY,
            Selects.ORDER,
            "argsort",  # torch.sort only says what stable=True keeps; argsort, its indices, says the rest
            "If False, the relative order of values which compare equal is not guaranteed.",
        ),
        TieContract(
            "topk_indices",
            "torch.topk(input, k, dim).indices",
            Rule.ANY,
            Selects.ORDER,
            "topk",
            "When using torch.topk, the indices of tied elements are not guaranteed to be stable and may vary "
            "across different invocations.",
        ),
        TieContract(
            "median_indices",
            "torch.median(input, dim).indices",
            Rule.ANY,
            Selects.ONE,
            "median",
            "indices does not necessarily contain the first occurrence of each median value found, unless it is "
            "unique.",
        ),
        TieContract(
            "kthvalue_indices",
            "torch.kthvalue(input, k, dim).indices",
            Rule.ANY,
            Selects.ONE,
            "kthvalue",  # no order promised on any device; CUDA's note names the freedom
            "And indices is the index location of each element found.",
        ),
    )
}


def is_open(op: str) -> bool:
    """Whether `op`'s result depends on a choice its contract leaves open (so no op may read it)."""
    contract = TIE_CONTRACTS.get(op)
    return contract is not None and contract.rule is Rule.ANY


def allows(contract: TieContract, x: torch.Tensor, attrs: dict, golden: torch.Tensor, compiled: Any) -> bool:
    """Whether `compiled` is an answer `contract` allows where torch answered `golden` on `x`:
    the same indices for a FIRST contract; for ANY, indices in range (distinct in a row, for
    an ORDER) that select the values torch's select."""
    if not isinstance(compiled, torch.Tensor) or compiled.shape != golden.shape or compiled.dtype != golden.dtype:
        return False
    if contract.rule is Rule.FIRST:
        return bool(torch.equal(compiled, golden))
    dim = attrs["dim"] % x.dim()
    if contract.selects is Selects.ONE and not attrs.get("keepdim", False):
        golden, compiled = golden.unsqueeze(dim), compiled.unsqueeze(dim)
    if bool(((compiled < 0) | (compiled >= x.shape[dim])).any()):
        return False
    if contract.selects is Selects.ORDER and compiled.shape[dim] > 1:
        ordered = compiled.sort(dim=dim).values
        n = ordered.shape[dim]
        if bool((ordered.narrow(dim, 1, n - 1) == ordered.narrow(dim, 0, n - 1)).any()):
            return False  # an index twice: not a permutation of a row
    return bool(torch.equal(x.gather(dim, compiled), x.gather(dim, golden)))


@dataclass(frozen=True)
class Settlement:
    """A compiled trace as its program's tie contracts judge it: `trace` with every answer a
    contract allows replaced by torch's (what is left to compare is what no contract
    excuses); `allowed` and `forbidden` name the outputs another index took."""

    trace: Trace
    allowed: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()


@runtime_checkable
class Settles(Protocol):
    """An explainer that knows answers a contract allows (the mutation tool asks it too)."""

    def settle(self, golden: Trace, trace: Trace) -> Settlement: ...


@dataclass(frozen=True)
class TieJudge:
    """The tie contracts of one program's index outputs (`program`: `e2e.generate.program.Program`)."""

    program: Any

    @property
    def judged(self) -> dict[int, str]:
        """Output number -> op, for the outputs an index op with a tie contract computes."""
        ops = {node.name: node.op for node in self.program.nodes}
        return {i: ops[name] for i, name in enumerate(self.program.outputs) if ops.get(name) in TIE_CONTRACTS}

    def settle(self, golden: Trace, trace: Trace) -> Settlement:
        judged = self.judged
        if not judged or trace is None:
            return Settlement(trace)
        nodes = {node.name: node for node in self.program.nodes}
        settled, allowed, forbidden = [], [], []
        for number, (expected, actual) in enumerate(zip(golden, trace)):
            want, spec = pytree.tree_flatten(expected.outputs)
            got, got_spec = pytree.tree_flatten(actual.outputs)
            if len(got) != len(want):
                settled.append(actual)
                continue
            values = None
            for index, op in judged.items():
                where = f"trace item #{number} ({expected.method}) @ output[{index}]"
                if index >= len(want) or compare_values(want[index], got[index], where, None) is None:
                    continue
                if values is None:
                    values = self.program.intermediates([t.clone() for t in expected.inputs])
                node = nodes[self.program.outputs[index]]
                x = values[node.inputs[0]]
                if allows(TIE_CONTRACTS[op], x, dict(node.attrs), want[index], got[index]):
                    got[index] = want[index]
                    allowed.append(f"{where} ({op})")
                else:
                    forbidden.append(f"{where} ({op}: {TIE_CONTRACTS[op].rule.value})")
            settled.append(dataclasses.replace(actual, outputs=pytree.tree_unflatten(got, got_spec)))
        return Settlement(settled, tuple(allowed), tuple(forbidden))
