"""Mutation testing (e2e.mutation): rewrites count and change sites, tests catch or miss
mutants, and survivors are told apart by the boundary-input equivalence check, judged
by what programs mean where they are defined."""

from __future__ import annotations

import pytest
import torch

from compiler.stages import module_text, new_context, parse_module
from e2e.framework import op_test
from e2e.framework.testutils import TestUtils, boundary_values
from e2e.mutation import catalogue
from e2e.mutation.catalogue import Mutation
from e2e.mutation.kill_matrix import before_after, kill_matrix, status
from e2e.mutation.rewrites import int_constant, predicate, rename, swap_operands
from e2e.mutation.run import CAUGHT, EQUIVALENT, SURVIVED, UNDEFINED, Job, run_test

LINALG = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %n: index) -> tensor<4xi1> {
  %c1 = arith.constant 1 : index
  %k = arith.constant 7 : i64
  %same = arith.cmpi slt, %n, %c1 : index
  %0 = tensor.empty() : tensor<4xi1>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%0 : tensor<4xi1>) {
  ^bb0(%x: f32, %y: f32, %o: i1):
    %gt = arith.cmpf ogt, %x, %y : f32
    %d = arith.subf %x, %y : f32
    %m = arith.maximumf %d, %y : f32
    %z = arith.cmpf ogt, %m, %x : f32
    %r = arith.andi %gt, %z : i1
    linalg.yield %r : i1
  } -> tensor<4xi1>
  return %1 : tensor<4xi1>
}
"""


def module():
    return parse_module(LINALG, new_context())


def test_rewrites_count_sites_without_changing_and_change_them_when_applied():
    m = module()
    ogt = predicate("arith.cmpf", "ogt", "oge")
    assert ogt(m, False) == 2 and "oge" not in module_text(m)
    assert ogt(m, True) == 2
    assert module_text(m).count("arith.cmpf oge") == 2 and ogt(m, False) == 0
    m.operation.verify()


def test_integer_rewrites_leave_index_values_alone():
    m = module()
    assert predicate("arith.cmpi", "slt", "sle")(m, False) == 0  # compares two index values
    assert int_constant(1)(m, True) == 1  # the i64 constant, not the index one
    assert "arith.constant 8 : i64" in module_text(m) and "arith.constant 1 : index" in module_text(m)


def test_swap_and_rename_keep_the_module_valid():
    m = module()
    assert swap_operands("arith.subf")(m, True) == 1
    assert (
        "arith.subf %arg4, %arg3" in module_text(m)
        or "subf %in_0, %in" in module_text(m)
        or module_text(m).count("arith.subf") == 1
    )
    assert rename("arith.maximumf", "arith.maxnumf")(m, True) == 1
    assert "arith.maxnumf" in module_text(m) and "arith.maximumf" not in module_text(m)
    m.operation.verify()


def test_user_mutations_register_and_are_checked():
    mine = Mutation("unit_ogt_to_olt", "linalg", "comparisons", "test", predicate("arith.cmpf", "ogt", "olt"))
    assert catalogue.register(mine) is mine and mine in catalogue.mutations()
    with pytest.raises(ValueError, match="duplicate"):
        catalogue.register(Mutation("unit_ogt_to_olt", "linalg", "x", "y", mine.rewrite))
    with pytest.raises(ValueError, match="unknown boundary"):
        Mutation("bad", "llvm", "x", "y", mine.rewrite)
    assert [m.name for m in catalogue.load("e2e.mutation.catalogue:CATALOGUE")][:1] == ["cmpf_ogt_to_oge"]


def test_boundary_inputs_tie_and_reach_the_extremes():
    values = boundary_values(torch.int8, thresholds=(5,))
    assert {-128, 127, -127, 126, 0, 4, 5, 6} <= set(values.tolist())
    floats = boundary_values(torch.float32, thresholds=(0.5,))
    assert torch.nextafter(torch.tensor(0.5), torch.tensor(1.0)) in floats
    assert not floats.isnan().any() and boundary_values(torch.float32, nan=True).isnan().any()
    x = TestUtils(3).boundary(8, 8)
    assert len(set(x.flatten().tolist())) < 20  # 64 draws from a small pool: ties


# A strict comparison of two inputs: with ties in the inputs `>` compiled as `>=` is
# caught; on uniform random inputs it survives, and the equivalence check finds a witness.
# relu (`x > 0 ? x : 0`) compiled with `>=` is the same function: equivalent.
op_test("MutationUnit_GtTies", torch.gt, lambda tu: [tu.boundary(6, 8), tu.boundary(6, 8)])
op_test("MutationUnit_GtRandom", torch.gt, lambda tu: [tu.rand(3, 4), tu.rand(3, 4)])
op_test("MutationUnit_Relu", torch.relu, lambda tu: [tu.randn(3, 4)])
# A float-to-int cast: fptosi compiled as fptoui is poison on negative inputs, whatever a
# CPU returns there (-3 for -3.0 on AVX2, -1 on AVX-512). On the test's own negative inputs
# the mutant is undefined: caught. On non-negative inputs it survives, and boundary values
# (negatives) witness that it is not equivalent.
op_test("MutationUnit_ToInt32", lambda x: x.to(torch.int32), lambda tu: [tu.rand(3, 4, low=-5.0, high=5.0)])
op_test("MutationUnit_ToInt32Positive", lambda x: x.to(torch.int32), lambda tu: [tu.rand(3, 4, low=0.0, high=5.0)])
# Integer inputs only: a strict `>` between two int tensors with distinct values at
# first; redrawn from those values, ties appear and tell `slt` from `sle`.
op_test(
    "MutationUnit_IntGt", torch.gt, lambda tu: [torch.arange(12).reshape(3, 4), torch.arange(12).flip(0).reshape(3, 4)]
)


@pytest.fixture(scope="module")
def records():
    names = ("cmpf_ogt_to_oge", "cmpf_ugt_to_uge", "swap_divf", "fptosi_to_fptoui", "cmpi_sgt_to_sge")
    return {
        name: run_test(Job(name, "linalg", "annotated", False, None, names))
        for name in (
            "MutationUnit_GtTies",
            "MutationUnit_GtRandom",
            "MutationUnit_Relu",
            "MutationUnit_ToInt32",
            "MutationUnit_ToInt32Positive",
            "MutationUnit_IntGt",
        )
    }


def test_a_mutant_is_caught_by_ties_and_survives_random_inputs_with_a_witness(records):
    rows = {
        r["name"]: r
        for r in kill_matrix(
            list(records.values()),
            [m for m in catalogue.mutations() if m.name in ("cmpf_ogt_to_oge", "cmpf_ugt_to_uge", "swap_divf")],
        )
    }
    ogt = rows["cmpf_ogt_to_oge"]
    assert ogt["reached"] == 2 and [e["test"] for e in ogt["caught"]] == ["MutationUnit_GtTies"]
    assert ogt["caught"][0]["verdict"] in CAUGHT
    survivor = ogt["survivors"][0]
    assert survivor["test"] == "MutationUnit_GtRandom" and survivor["verdict"] == SURVIVED
    assert "not equivalent" in survivor["detail"]
    assert status(ogt) == "killed"


def test_an_equivalent_survivor_is_shown_equivalent_and_unreached_mutations_run_nothing(records):
    rows = {r["name"]: r for r in kill_matrix(list(records.values()), catalogue.mutations())}
    relu = rows["cmpf_ugt_to_uge"]
    assert relu["reached"] == 1 and relu["survivors"][0]["verdict"] == EQUIVALENT and status(relu) == "equivalent"
    assert rows["swap_divf"]["reached"] == 0 and status(rows["swap_divf"]) == "unreached"
    assert all(r.baseline == "pass" for r in records.values())


def test_a_cast_mutant_undefined_on_the_tests_own_inputs_is_caught_as_undefined(records):
    rows = {r["name"]: r for r in kill_matrix([records["MutationUnit_ToInt32"]], catalogue.mutations())}
    cast = rows["fptosi_to_fptoui"]
    assert cast["reached"] == 1 and status(cast) == "killed", cast
    (caught,) = cast["caught"]
    assert caught["verdict"] == UNDEFINED, caught
    assert "arith.fptoui on i32: poison" in caught["detail"] and "input there: -" in caught["detail"], caught


def test_a_cast_mutant_that_survives_has_an_undefined_witness_not_equivalence(records):
    rows = {r["name"]: r for r in kill_matrix([records["MutationUnit_ToInt32Positive"]], catalogue.mutations())}
    cast = rows["fptosi_to_fptoui"]
    (survivor,) = cast["survivors"]
    assert survivor["verdict"] == SURVIVED and status(cast) == "SURVIVES", survivor
    assert "not equivalent" in survivor["detail"] and "arith.fptoui on i32: poison" in survivor["detail"], survivor


def test_equivalence_is_claimed_only_where_the_unmutated_program_is_defined():
    from e2e.mutation.run import mutation_key

    # fptosi "mutated" into itself: equivalent wherever fptosi is defined; NaN, inf and
    # the out-of-range boundary samples leave the unmutated program undefined.
    same = catalogue.register(
        Mutation("unit_fptosi_as_itself", "linalg", "casts", "test", rename("arith.fptosi", "arith.fptosi"))
    )
    record = run_test(Job("MutationUnit_ToInt32Positive", "linalg", "annotated", False, None, (same.name,)))
    verdict, detail = record.verdicts[mutation_key(same)]
    assert verdict == EQUIVALENT, detail
    assert "left out: the unmutated program is undefined there" in detail


def test_a_test_without_float_inputs_is_checked_on_its_own_values_redrawn(records):
    rows = {r["name"]: r for r in kill_matrix([records["MutationUnit_IntGt"]], catalogue.mutations())}
    sgt = rows["cmpi_sgt_to_sge"]
    assert sgt["reached"] == 1 and not sgt["caught"]  # no ties in the test's own inputs
    assert sgt["survivors"][0]["verdict"] == SURVIVED and "not equivalent" in sgt["survivors"][0]["detail"]


def test_before_after_shows_what_new_tests_changed(records):
    chosen = [m for m in catalogue.mutations() if m.name == "cmpf_ogt_to_oge"]
    before = kill_matrix([records["MutationUnit_GtRandom"]], chosen)
    after = kill_matrix(list(records.values()), chosen)
    assert status(before[0]) == "SURVIVES" and status(after[0]) == "killed"
    line = before_after(before, after).splitlines()[-1]
    assert line.split()[0] == "cmpf_ogt_to_oge" and "SURVIVES -> killed" in line


def test_property_families_register_the_same_named_cases_on_every_import():
    from e2e.properties.families import FAMILIES, examples

    first = [repr(examples(f, 3)) for f in FAMILIES]
    assert first == [repr(examples(f, 3)) for f in FAMILIES]
    assert {f.name for f in FAMILIES} >= {"unary", "binary", "reduction", "pool2d", "compare"}


def test_an_off_by_one_constant_wraps_like_its_integer_type():
    m = parse_module(
        "func.func @f() -> i64 {\n  %c = arith.constant 9223372036854775807 : i64\n  return %c : i64\n}", new_context()
    )
    assert int_constant(1)(m, True) == 1
    assert "arith.constant -9223372036854775808 : i64" in module_text(m)


GUARDED_OPS = """
func.func @main(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %e = tensor.empty() : tensor<4xi32>
  %q, %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<4xi32>, tensor<4xi32>) outs(%e, %e : tensor<4xi32>, tensor<4xi32>) {
  ^bb0(%x: i32, %y: i32, %o: i32, %p: i32):
    %d = arith.divsi %x, %y : i32
    %t = arith.shrsi %x, %y : i32
    linalg.yield %d, %t : i32, i32
  } -> (tensor<4xi32>, tensor<4xi32>)
  return %q, %s : tensor<4xi32>, tensor<4xi32>
}
"""


@pytest.mark.parametrize(
    "a, b, defined",
    [
        ([8, -9, 7, 100], [2, 3, 1, 31], [True, True, True, True]),
        ([8, 1, 7, 100], [2, 0, 1, 31], [True, False, True, True]),  # division by zero: no trap
        ([8, -(2**31), 7, 100], [2, -1, 1, 31], [True, False, True, True]),  # INT_MIN / -1 (and shift -1)
        ([8, 5, 7, 100], [2, 3, 1, 32], [True, True, True, False]),  # a shift by the width
    ],
)
def test_guarded_ops_are_defined_everywhere_and_the_two_fills_show_where_they_were_not(a, b, defined):
    from compiler.refbackend import compile_linalg
    from e2e.mutation.undefined import ONES, ZERO, guard

    outputs = []
    for fill in (ZERO, ONES):
        module = parse_module(GUARDED_OPS, new_context())
        assert guard(module, fill).sites == {"arith.divsi": {32: 1}, "arith.shrsi": {32: 1}}
        program = compile_linalg(module, [torch.int32, torch.int32])
        outputs.append(program(torch.tensor(a, dtype=torch.int32), torch.tensor(b, dtype=torch.int32)))
        program.close()
    (quotient_zero, shift_zero), (quotient_ones, shift_ones) = outputs
    same = ((quotient_zero == quotient_ones) & (shift_zero == shift_ones)).tolist()
    assert same == defined


def test_no_equivalence_is_claimed_where_the_unmutated_program_is_never_defined():
    from e2e.mutation.equivalence import TESTS_OWN, Sample, judge

    # Every input leaves the unmutated program undefined (expected None): nothing is run,
    # and nothing is claimed.
    samples = [Sample(TESTS_OWN, [], None), Sample("sample 0", [], None)]
    judgement = judge(samples, mutant=None, tolerance=None)
    assert judgement.verdict == "unjudged" and "undefined on all 2 inputs" in judgement.detail
