"""Boundary draws (`e2e.generate.boundary`) and tie contracts (`e2e.generate.ties`): a share
of programs meets ties and zeros, still valid; the judge takes every index a contract allows."""

from __future__ import annotations

import itertools

import torch

from e2e.framework.compare import compare_traces
from e2e.framework.judge import Outcome
from e2e.framework.prepared import prepare
from e2e.framework.testutils import TestUtils, seed_for
from e2e.framework.trace import TraceItem
from e2e.generate.boundary import BOUNDARY, UNIFORM, is_boundary
from e2e.generate.grow import generate, invalid
from e2e.generate.program import InputSpec, Node, Program
from e2e.generate.register import program_test
from e2e.generate.ties import TIE_CONTRACTS, Rule, allows
from e2e.generate.types import TensorType

SEEDS = range(7000, 7080)


def drawn_at_boundary(program: Program) -> bool:
    return all(i.values == BOUNDARY for i in program.inputs)


def test_the_share_of_boundary_programs_is_the_one_asked_for_and_nested():
    for share in (0.0, 0.25, 0.5, 1.0):
        boundary = [s for s in range(1000) if is_boundary(s, share)]
        assert abs(len(boundary) - 1000 * share) <= 40
    assert set(s for s in range(1000) if is_boundary(s, 0.25)) <= set(s for s in range(1000) if is_boundary(s, 0.5))
    programs = {s: generate(s, boundary_share=0.5) for s in SEEDS}
    at_boundary = [s for s, p in programs.items() if drawn_at_boundary(p)]
    uniform = [s for s, p in programs.items() if all(i.values == UNIFORM for i in p.inputs)]
    assert sorted(at_boundary + uniform) == list(SEEDS)  # a program is one or the other
    assert at_boundary == [s for s in SEEDS if is_boundary(s, 0.5)]
    assert not any(drawn_at_boundary(generate(s, boundary_share=0.0)) for s in at_boundary[:5])


def test_boundary_programs_meet_ties_and_zeros_deterministically_and_stay_valid():
    programs = [generate(s, boundary_share=1.0) for s in SEEDS[:40]]
    floats = tied = zeros = 0
    for program in programs:
        assert drawn_at_boundary(program)
        assert invalid(program) is None  # the grower's own checks, replayed
        assert generate(program.seed, boundary_share=1.0) == program
        assert Program.from_json(program.to_json()) == program
        inputs = program.make_inputs(TestUtils(seed_for(program.name)))
        again = program.make_inputs(TestUtils(seed_for(program.name)))
        assert all(torch.equal(a, b) for a, b in zip(inputs, again))
        for x in inputs:
            if x.is_floating_point() and x.numel() > 1:
                floats += 1
                tied += x.unique().numel() < x.numel()
                zeros += bool((x == 0).any())
    assert floats >= 20 and tied >= 0.8 * floats and zeros >= 0.2 * floats
    uniform = generate(SEEDS[0], boundary_share=0.0)
    for x in uniform.make_inputs(TestUtils(seed_for(uniform.name))):
        if x.is_floating_point():
            assert x.unique().numel() == x.numel() and not bool((x == 0).any())


def one_op(op: str, values: str, attrs=(), shape=(4,), first: str = "sin") -> Program:
    """x0 -> (sin ->) `op`(v, v): a tie of a value with itself, exact or computed."""
    x = InputSpec("x0", TensorType(shape, "float32"), values=values)
    nodes = [Node("v0", first, ("x0",), (), x.type)] if first else []
    operand = nodes[-1].name if nodes else "x0"
    nodes.append(Node("v1", op, (operand, operand), attrs, TensorType(shape, "bool")))
    return Program(1, (x,), tuple(nodes), ("v1",))


def test_a_tie_is_kept_on_exact_values_only():
    assert invalid(one_op("gt", BOUNDARY, first="")) is None  # x > x on inputs: exactly False everywhere
    assert invalid(one_op("gt", UNIFORM, first="")) is None
    assert invalid(one_op("gt", UNIFORM, first="sin")) == "stable"  # sin(x) > sin(x): rounded values
    assert invalid(one_op("gt", BOUNDARY, first="relu")) is None  # relu moves values: still exact


def test_the_tie_contracts_come_from_the_docs():
    assert TIE_CONTRACTS["argmax"].rule is Rule.FIRST and "first maximal" in TIE_CONTRACTS["argmax"].documented
    assert (
        TIE_CONTRACTS["topk_indices"].rule is Rule.ANY and "not guaranteed" in TIE_CONTRACTS["topk_indices"].documented
    )
    assert {op for op, c in TIE_CONTRACTS.items() if c.rule is Rule.ANY} == {
        "sort_indices",
        "topk_indices",
        "median_indices",
        "kthvalue_indices",
    }


def test_the_judge_accepts_an_index_the_contract_allows_and_no_other():
    x = torch.tensor([[3.0, 1.0, 3.0, 0.0]])
    sort, argmax, median = TIE_CONTRACTS["sort_indices"], TIE_CONTRACTS["argmax"], TIE_CONTRACTS["median_indices"]
    descending = {"dim": 1, "descending": True}
    golden = torch.tensor([[0, 2, 1, 3]])
    assert allows(sort, x, descending, golden, torch.tensor([[2, 0, 1, 3]]))  # the equal 3.0s swapped
    assert not allows(sort, x, descending, golden, torch.tensor([[0, 1, 2, 3]]))  # 1.0 before a 3.0
    assert not allows(sort, x, descending, golden, torch.tensor([[0, 0, 1, 3]]))  # not a permutation
    assert not allows(argmax, x, {"dim": 1, "keepdim": False}, torch.tensor([0]), torch.tensor([2]))  # first, fixed
    y = torch.tensor([[1.0, 2.0, 2.0]])
    assert allows(median, y, {"dim": 1, "keepdim": False}, torch.tensor([1]), torch.tensor([2]))
    assert not allows(median, y, {"dim": 1, "keepdim": False}, torch.tensor([1]), torch.tensor([0]))


def topk_program() -> Program:
    x = InputSpec("x0", TensorType((2, 5), "float32"), values=BOUNDARY)
    node = Node("v0", "topk_indices", ("x0",), (("dim", 1), ("k", 3), ("largest", True)), TensorType((2, 3), "int64"))
    return Program(5, (x,), (node,), ("v0",))


def judged(program: Program, answer):
    """The generated test's oracle on a compiled trace whose output is `answer(x, golden)`."""
    test = program_test(program)
    prepared = prepare(test)
    golden = prepared.golden[0]
    trace = [TraceItem(golden.method, golden.inputs, answer(golden.inputs[0], golden.outputs))]
    mismatch = compare_traces(prepared.golden, trace)
    assert mismatch is not None
    oracle = test.explainers[-1]
    return oracle.explain(prepared, Outcome("compare", mismatch=mismatch, trace=trace))


def other_tied_index(x: torch.Tensor, golden: torch.Tensor) -> torch.Tensor:
    """Indices of the same values as `golden`'s in another order: two equal values swapped."""
    out = golden.clone()
    for row in range(x.shape[0]):
        picked = golden[row].tolist()
        for j, k in itertools.combinations(range(len(picked)), 2):
            if x[row, picked[j]] == x[row, picked[k]]:
                out[row, j], out[row, k] = picked[k], picked[j]
                return out
    raise AssertionError("no tie to swap")


def test_the_oracle_acquits_another_tied_index_and_keeps_a_wrong_one():
    program = topk_program()
    x = program.make_inputs(TestUtils(seed_for(program.name)))[0]
    assert x.unique().numel() < x.numel()  # the boundary draw gave it ties
    acquitted = judged(program, other_tied_index)
    assert acquitted.acquit and "tie contract acquits" in acquitted.notes[0]

    def wrong(x, golden):
        out = golden.clone()
        out[0, 0] = int(x[0].argmin())  # the smallest value where the largest belongs
        return out

    kept = judged(program, wrong)
    assert not kept.acquit and "tie contract failed" in kept.notes[0]
