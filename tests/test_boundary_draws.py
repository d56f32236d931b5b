"""Boundary draws (`e2e.generate.boundary`) and tie contracts (`e2e.generate.ties`): a share
of programs meets ties and zeros, still valid; the judge takes every index a contract allows."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from e2e.framework.compare import compare_traces
from e2e.framework.judge import Outcome
from e2e.framework.prepared import prepare
from e2e.framework.testutils import TestUtils, seed_for
from e2e.framework.trace import TraceItem
from e2e.generate.boundary import BOUNDARY, SHARED, UNIFORM, draw, float_pool, is_boundary, ranking
from e2e.generate.grow import generate, invalid
from e2e.generate.ops import CATALOGUE, PROPAGATES, defined_shift, shift_amount
from e2e.generate.program import NAMESPACE, InputSpec, Node, Program
from e2e.generate.register import program_test
from e2e.generate.ties import TIE_CONTRACTS, Rule, Selects, allows, doc_text
from e2e.generate.types import NAN, Domain, TensorType, has_nan

REPO = Path(__file__).resolve().parents[1]

SEEDS = range(7000, 7080)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal elements, NaN where NaN."""
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def test_the_share_of_boundary_programs_is_the_one_asked_for_and_nested():
    for share in (0.0, 0.25, 0.5, 1.0):
        boundary = [s for s in range(1000) if is_boundary(s, share)]
        assert abs(len(boundary) - 1000 * share) <= 40
    assert set(s for s in range(1000) if is_boundary(s, 0.25)) <= set(s for s in range(1000) if is_boundary(s, 0.5))
    programs = {s: generate(s, boundary_share=0.5) for s in SEEDS}
    at_boundary = [s for s, p in programs.items() if p.at_boundary]
    assert set(at_boundary) <= {s for s in SEEDS if is_boundary(s, 0.5)}
    assert len(at_boundary) >= 0.9 * len([s for s in SEEDS if is_boundary(s, 0.5)])  # a few fall back wholly
    assert not any(generate(s, boundary_share=0.0).at_boundary for s in at_boundary[:5])


def test_a_boundary_program_is_its_uniform_twin_with_other_values():
    """The same ops, attributes and input types as the seed's uniform program; each input
    drawn at the boundaries unless the program is invalid with it so (then uniformly)."""
    drawn = fallen_back = 0
    for seed in SEEDS:
        program, twin = generate(seed, boundary_share=1.0), generate(seed, boundary_share=0.0)
        assert program.nodes == twin.nodes and program.outputs == twin.outputs
        assert [replace(i, values=UNIFORM) for i in program.inputs] == list(twin.inputs)
        kinds = [i.values for i in program.inputs]
        drawn += kinds.count(BOUNDARY)
        if UNIFORM in kinds:  # fell back: with every input at the boundaries it would be invalid
            fallen_back += 1
            every = replace(program, inputs=tuple(replace(i, values=BOUNDARY) for i in program.inputs))
            assert invalid(every) is not None, seed
    inputs = sum(len(generate(s, boundary_share=0.0).inputs) for s in SEEDS)
    assert drawn >= 0.85 * inputs and fallen_back >= 1


def test_boundary_programs_meet_ties_and_zeros_deterministically_and_stay_valid():
    programs = [generate(s, boundary_share=1.0) for s in SEEDS[:40]]
    floats = tied = zeros = 0
    for program in programs:
        assert invalid(program) is None  # the grower's own checks, replayed
        assert generate(program.seed, boundary_share=1.0) == program
        assert Program.from_json(program.to_json()) == program
        inputs = program.make_inputs(TestUtils(seed_for(program.name)))
        again = program.make_inputs(TestUtils(seed_for(program.name)))
        assert all(same(a, b) for a, b in zip(inputs, again))
        for spec_, x in zip(program.inputs, inputs):
            if spec_.values == BOUNDARY and x.is_floating_point() and x.numel() > 1:
                floats += 1
                tied += x.unique().numel() < x.numel()
                zeros += bool((x == 0).any())
    assert floats >= 20 and tied >= 0.8 * floats and zeros >= 0.2 * floats
    uniform = generate(SEEDS[0], boundary_share=0.0)
    for x in uniform.make_inputs(TestUtils(seed_for(uniform.name))):
        if x.is_floating_point():
            assert x.unique().numel() == x.numel() and not bool((x == 0).any())


def test_the_tensors_of_a_program_share_its_first_ranked_value_and_tie_across_operands():
    """Every boundary palette opens with the program's first ranked value its domain holds
    (`boundary.ranking`), so two operands of a comparison tie, not only a tensor with itself."""
    assert len({ranking(seed) for seed in range(20)}) >= 15 and sorted(ranking(0)) == sorted(SHARED)
    for seed in range(20):
        order = ranking(seed)
        tu = TestUtils(seed)
        a, b = (draw(tu, (64,), "float32", Domain(), order) for _ in range(2))
        first = torch.tensor(next(v for v in order if v in float_pool("float32", Domain())))  # not +-3
        assert all(bool(((x == first) & (x.signbit() == first.signbit())).any()) for x in (a, b))
        assert bool((a == b).any())
    sqrt_domain = Domain(low=0.0)  # -1.5 is not in it: the first ranked value it holds opens the palette
    order = (-1.5, 0.5, *(v for v in SHARED if v not in (-1.5, 0.5)))
    assert bool((draw(TestUtils(0), (64,), "float32", sqrt_domain, order) == 0.5).any())


def even_half(v: torch.Tensor) -> torch.Tensor:
    return (v.abs() == 0.5) | (v.abs() == 2.5)  # rounded to even, not away from zero


@pytest.mark.parametrize(
    "op, at_point, always",
    [
        ("round", even_half, True),
        ("sign", lambda v: v == 0, True),  # neither > 0 nor < 0
        ("floor", even_half, False),  # no points: it draws from the halves as any op
    ],
)
def test_an_input_an_op_with_points_reads_holds_one(op, at_point, always):
    """An op's points (`OpSpec.points`: where its rule alone decides the result) are in the
    palette of a boundary input it reads, and only there."""
    hits = 0
    for seed in range(20):
        x = InputSpec("x0", TensorType((64,), "float32"), values=BOUNDARY)
        program = Program(seed, (x,), (Node("v0", op, ("x0",), (), x.type),), ("v0",))
        hits += bool(at_point(program.make_inputs(TestUtils(seed_for(program.name)))[0]).any())
    assert hits == 20 if always else hits < 20


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
    for contract in TIE_CONTRACTS.values():
        assert contract.documented in doc_text(contract.doc), contract.op  # verbatim, in torch's own docstring
        assert contract.op in CATALOGUE
    assert {op for op, c in TIE_CONTRACTS.items() if c.rule is Rule.FIRST} == {
        "argmax",
        "argmin",
        "max_dim_indices",
        "min_dim_indices",
        "sort_stable_indices",
    }
    assert {op for op, c in TIE_CONTRACTS.items() if c.rule is Rule.ANY} == {
        "sort_indices",
        "topk_indices",
        "median_indices",
        "kthvalue_indices",
    }


# One row with ties at both ends: 2.0 at 0, 2, 4 and 1.0 at 1, 3.
ROW = torch.tensor([[2.0, 1.0, 2.0, 1.0, 2.0]])
TIE_ATTRS = {
    "argmax": {"dim": 1, "keepdim": False},
    "argmin": {"dim": 1, "keepdim": False},
    "max_dim_indices": {"dim": 1, "keepdim": False},
    "min_dim_indices": {"dim": 1, "keepdim": False},
    "median_indices": {"dim": 1, "keepdim": False},
    "kthvalue_indices": {"k": 2, "dim": 1, "keepdim": False},
    "sort_indices": {"dim": 1, "descending": True},
    "sort_stable_indices": {"dim": 1, "descending": True},
    "topk_indices": {"k": 3, "dim": 1, "largest": True},
}


def tied_other(golden: torch.Tensor, selects: Selects) -> torch.Tensor:
    """Another answer that selects the same values: an index of an equal value instead of
    torch's (ONE), or two equal values' indices swapped (ORDER)."""
    if selects is Selects.ONE:
        index = int(golden[0])
        return torch.tensor([next(j for j in range(ROW.shape[1]) if j != index and ROW[0, j] == ROW[0, index])])
    out, row = golden.clone(), golden[0].tolist()
    j, k = next((j, k) for j, k in itertools.combinations(range(len(row)), 2) if ROW[0, row[j]] == ROW[0, row[k]])
    out[0, j], out[0, k] = row[k], row[j]
    return out


def wrong_value(golden: torch.Tensor, selects: Selects) -> torch.Tensor:
    """An answer that selects another value: the first index of a value torch did not pick."""
    out = golden.clone()
    flat = out.view(-1)
    picked = ROW[0, int(flat[0])]
    flat[0] = next(j for j in range(ROW.shape[1]) if ROW[0, j] != picked)
    return out


@pytest.mark.parametrize("op", sorted(TIE_CONTRACTS))
def test_each_tie_contract_takes_the_answers_it_allows_and_no_other(op):
    contract, attrs = TIE_CONTRACTS[op], TIE_ATTRS[op]
    golden = eval(CATALOGUE[op].render(["x"], attrs), NAMESPACE, {"x": ROW.clone()})  # noqa: S307 - the catalogue's
    assert allows(contract, ROW, attrs, golden, golden.clone())
    other = tied_other(golden, contract.selects)
    assert not torch.equal(other, golden)
    assert allows(contract, ROW, attrs, golden, other) is (contract.rule is Rule.ANY)
    assert not allows(contract, ROW, attrs, golden, wrong_value(golden, contract.selects))
    if contract.rule is Rule.FIRST:  # torch itself keeps what its docs promise: equal values' first index first
        picked = golden.view(-1).tolist()
        for index in picked:
            assert all(ROW[0, j] != ROW[0, index] for j in range(index) if j not in picked[: picked.index(index)])


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
    *twin, golden = prepared.golden  # a boundary program's test: its uniform twin's call first, then its own
    trace = [*twin, TraceItem(golden.method, golden.inputs, answer(golden.inputs[0], golden.outputs))]
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


# --- NaN where the contract says what it does; shifts below the width -------------------------


def test_the_nan_contracts_come_from_the_docs():
    quote = "If one of the elements being compared is a NaN, then that element is returned."
    assert quote in doc_text("maximum") and quote in doc_text("minimum")
    assert {n for n, s in CATALOGUE.items() if s.nan == PROPAGATES} == {"maximum", "minimum", "amax", "amin"}
    with_nan = {n for n, s in CATALOGUE.items() if s.nan is not None}
    assert with_nan == {"maximum", "minimum", "amax", "amin", "eq", "ne", "lt", "le", "gt", "ge"}


def test_nan_is_withheld_only_for_a_known_bug_the_suite_lists():
    withheld = {n: s.nan_withheld for n, s in CATALOGUE.items() if s.nan_withheld}
    assert set(withheld) == {"maximum", "minimum"}
    linalg_xfails = (REPO / "e2e/configs/xfail/linalg.txt").read_text()
    for reason in withheld.values():
        test = re.search(r"xfail (\w+) on linalg", reason).group(1)
        assert re.search(rf"^{test}\s+# fail: compare \| nan", linalg_xfails, re.M), reason


def test_nan_reaches_only_an_op_whose_contract_says_what_it_does():
    reached = set()
    for seed in range(7000000, 7000400):
        program = generate(seed, boundary_share=0.5)
        inputs = program.make_inputs(TestUtils(seed_for(program.name)))
        for spec_, x in zip(program.inputs, inputs):
            assert not has_nan(x) or (spec_.domain.nan and spec_.values == BOUNDARY)
        values = program.intermediates(inputs)
        for node in program.nodes:
            if any(has_nan(values[name]) for name in node.inputs):
                assert CATALOGUE[node.op].takes_nan, (seed, node)
                reached.add(node.op)
    assert {"gt", "lt", "ne", "amax", "amin"} <= reached  # the NaN mutations' ops all meet one
    assert not reached & {"maximum", "minimum"}  # withheld: their known bug


def nan_program(op: str, result: str = "bool") -> Program:
    """x0 -> `op`(x0, x0), x0 a boundary input that may hold NaN: the first seed whose draw does."""
    for seed in range(100):
        x = InputSpec("x0", TensorType((6,), "float32"), NAN, values=BOUNDARY)
        node = Node("v0", op, ("x0", "x0"), (), TensorType((6,), result))
        program = Program(seed, (x,), (node,), ("v0",))
        if has_nan(program.make_inputs(TestUtils(seed_for(program.name)))[0]):
            return program
    raise AssertionError("no NaN drawn")


def test_a_nan_is_kept_where_the_contract_says_and_turned_away_elsewhere():
    assert invalid(nan_program("gt")) is None  # NaN > NaN is False: IEEE's answer, torch's
    assert invalid(nan_program("ne")) is None
    assert invalid(nan_program("maximum", "float32")) == "domain"  # its contract holds, its NaN withheld
    assert invalid(nan_program("atan2", "float32")) == "domain"  # atan2 promises nothing of NaN
    assert invalid(nan_program("add", "float32")) == "domain"


def test_the_oracle_keeps_a_nan_not_propagated():
    program = nan_program("maximum", "float32")

    def maxnum(x, golden):  # maxnumf: the other operand where one is NaN (here: NaN too, or 0)
        return golden.nan_to_num(0.0)

    verdict = judged(program, maxnum)
    assert not verdict.acquit


def test_a_shift_stays_below_the_width():
    x = torch.tensor([-8, 5], dtype=torch.int64)
    assert defined_shift([x, torch.tensor([0, 63])], {}, None) is None
    assert defined_shift([x, torch.tensor([64, 1])], {}, None) == "no_shift"  # torch: undefined
    assert defined_shift([x, torch.tensor([-1, 1])], {}, None) == "no_shift"
    assert shift_amount("int8") == shift_amount("int8").meet(shift_amount("int64"))  # [0, 7]
    negative_shifted = 0
    for seed in range(7000000, 7000400):
        program = generate(seed)
        values = program.intermediates(program.make_inputs(TestUtils(seed_for(program.name))))
        for node in (n for n in program.nodes if n.op == "bitwise_right_shift"):
            x, amount = torch.broadcast_tensors(values[node.inputs[0]], values[node.inputs[1]])
            assert bool(((amount >= 0) & (amount < torch.iinfo(x.dtype).bits)).all())
            negative_shifted += bool(((x < 0) & (amount > 0)).any())  # where arithmetic and logical differ
    assert negative_shifted >= 3


def test_a_boundary_programs_test_runs_its_uniform_twin_first_then_its_own_inputs():
    """One compile, two calls: the seed's uniform program's inputs (what a campaign without
    boundary draws finds there), then the boundary ones; a uniform program's test calls once."""
    seed = next(s for s in SEEDS if is_boundary(s, 0.5) and generate(s, boundary_share=0.5).at_boundary)
    program, twin = generate(seed, boundary_share=0.5), generate(seed, boundary_share=0.0)

    class Recorder:
        def __init__(self):
            self.calls = []

        def forward(self, *inputs):
            self.calls.append(inputs)

    def calls(p: Program) -> list[tuple[torch.Tensor, ...]]:
        test, recorder = program_test(p), Recorder()
        test.program_invoker(recorder, test.test_utils(0))
        return recorder.calls

    first, second = calls(program)
    expected = (
        twin.make_inputs(TestUtils(seed_for(twin.name))),
        program.make_inputs(TestUtils(seed_for(program.name))),
    )
    assert all(same(a, b) for a, b in zip(first, expected[0])) and all(same(a, b) for a, b in zip(second, expected[1]))
    assert not all(same(a, b) for a, b in zip(first, second))
    assert len(calls(twin)) == 1
    # Validity covers both calls: a boundary program whose twin is not valid is not either.
    assert invalid(program) is None and invalid(twin) is None
