"""StableHLO's testdata as a suite: reading a program, its checks' comparisons, and real
programs run on the testdata configs. Skipped when there is no corpus (pass
`--stablehlo-testdata DIR` to the suite, or set $STABLEHLO_TESTDATA, for these tests)."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from e2e.configs import load_config
from e2e.framework import registry
from e2e.framework.isolation import Limits
from e2e.framework.prepared import prepare
from e2e.framework.result import FAIL, PASS
from e2e.framework.runner import run_pair
from e2e.stablehlo_testdata.program import Check, compare, dense_values, read_program
from e2e.stablehlo_testdata.register import OPTION, StablehloProgram, corpus_dir
from tests.extras import requires_extra

ROOT = corpus_dir()
needs_corpus = pytest.mark.skipif(
    ROOT is None or not ROOT.is_dir(),
    reason=f"no StableHLO testdata: set $STABLEHLO_TESTDATA (the suite's {OPTION} DIR) to openxla/stablehlo's testdata",
)
REFBACKEND = "e2e.stablehlo_testdata.configs:REFBACKEND"


def program_test(name: str) -> registry.Test:
    program = read_program(ROOT / f"{name}.mlir", name)
    return registry.Test(
        f"stablehlo/{name}",
        lambda: StablehloProgram(program),
        lambda module, tu: module.forward(),
        model_format="stablehlo",
    )


def run(name: str, tmp_path, config: str = REFBACKEND):
    return run_pair(prepare(program_test(name)), load_config(config), reports_dir=tmp_path, limits=Limits(300, None))


# --- the checks' comparisons (no corpus needed) ----------------------------------------


def bits_apart(value: float, ulps: int, dtype=torch.float32) -> torch.Tensor:
    tensor = torch.tensor([value], dtype=dtype)
    width = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[dtype]
    return (tensor.view(width) + ulps).view(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_expect_close_allows_three_ulps_and_not_four(dtype):
    check = Check("expect_close", "%2", "%1", "tensor<1xf32>")
    expected = torch.tensor([1.5], dtype=dtype)
    assert compare(check, bits_apart(1.5, 3, dtype), expected) is None
    problem = compare(check, bits_apart(1.5, 4, dtype), expected)
    assert problem is not None and "ULP distance above 3 (largest 4)" in problem


def test_expect_close_is_stablehlos_ulp_difference():
    one = Check("expect_close", "%2", "%1", "tensor<2xf32>")
    assert compare(one, torch.tensor([float("nan"), -0.0]), torch.tensor([float("nan"), 0.0])) is None
    assert compare(one, torch.tensor([float("nan"), 0.0]), torch.tensor([1.0, 0.0])) is not None
    # Bit patterns as they are: 3 subnormal steps from zero pass, the smallest normal is 2**23 away.
    assert compare(one, bits_apart(0.0, 3).expand(2).clone(), torch.zeros(2)) is None
    tiny = torch.tensor([torch.finfo(torch.float32).tiny] * 2)
    assert "largest 8388608" in compare(one, tiny, torch.zeros(2))
    assert (
        compare(one, bits_apart(0.0, 2).expand(2).clone(), -bits_apart(0.0, 1).expand(2)) is None
    )  # 2 + 1 across zero
    inf = torch.tensor([float("inf")] * 2)
    assert compare(one, inf, inf.clone()) is None
    assert compare(one, inf, -inf) is not None and compare(one, inf, torch.full((2,), 3.0e38)) is not None
    nans = torch.tensor([0xFFC0 - 0x10000, 0x7FFF], dtype=torch.int16).view(torch.bfloat16)  # payloads 63 apart
    assert compare(Check("expect_close", "", "", ""), nans, nans.flip(0)) is None
    complex_expected = torch.tensor([1 + 2j], dtype=torch.complex64)
    assert compare(Check("expect_close", "", "", ""), complex_expected.clone(), complex_expected) is None


def test_expect_almost_eq_is_absolute_1e_3_eq_on_floats_1e_4_and_expect_eq_is_exact():
    almost = Check("expect_almost_eq", "%2", "%1", "tensor<2xf32>")
    expected = torch.tensor([100.0, 0.5])
    assert compare(almost, expected + 5e-4, expected) is None
    assert compare(almost, expected + 2e-3, expected) is not None
    # testdata-xla's cos_complex64_20_20: one float32 step apart above 1024, 1.2e-4.
    cos = torch.tensor([-1249.733642578125 + 0j], dtype=torch.complex64)
    assert compare(Check("expect_almost_eq", "", "", ""), cos, torch.tensor([-1249.7337646484375 + 0j])) is None
    assert compare(almost, torch.tensor([-1e-5, 0.0]), torch.tensor([1e-5, 0.0])) is None  # no sign condition
    assert compare(almost, torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.0])) is None
    assert compare(almost, torch.tensor([float("inf"), 1.0]), torch.tensor([3.0e38, 1.0])) is not None
    eq = Check("eq", "%2", "%1", "tensor<2xf32>")
    assert compare(eq, expected + 5e-5, expected) is None
    assert compare(eq, expected + 5e-4, expected) is not None
    exact = Check("expect_eq", "%2", "%1", "tensor<2xf32>")
    assert compare(exact, expected.clone(), expected) is None
    assert compare(exact, bits_apart(100.0, 1).expand(2).clone(), expected) is not None
    ints = torch.tensor([1, 2], dtype=torch.int32)
    assert "1 of 2 elements" in compare(exact, torch.tensor([1, 3], dtype=torch.int32), ints)
    assert compare(almost, torch.tensor([1, 3], dtype=torch.int32), ints) is not None  # integers: exact
    assert compare(eq, torch.tensor([1, 3], dtype=torch.int32), ints) is not None


def test_dense_literals_hex_splats_and_complex_become_tensors():
    bf16 = dense_values('"0x2940C740"', "tensor<2xbf16>")
    assert bf16.dtype == torch.bfloat16 and bf16.tolist() == [2.640625, 6.21875]
    assert dense_values("1.500000e+00", "tensor<2x2xf16>").tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert dense_values("[0x7FC0, -2.0]", "tensor<2xbf16>")[0].isnan()
    values = dense_values("[(1.0,2.0), (3.0,-4.0)]", "tensor<2xcomplex<f32>>")
    assert values.dtype == torch.complex64 and values.tolist() == [1 + 2j, 3 - 4j]
    assert dense_values("[true, false]", "tensor<2xi1>").tolist() == [True, False]
    assert dense_values("[1, 65535]", "tensor<2xui16>").dtype == torch.uint16


PROGRAM = """module @jit_main {
  func.func public @main() -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<2xf32>
    %1 = call @expected() : () -> tensor<2xf32>
    %2 = stablehlo.abs %0 : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %2 : tensor<2xf32>
  }
  func.func private @inputs() -> (tensor<2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[-1.000000e+00, 2.500000e+00]> : tensor<2xf32>
    return %cst : tensor<2xf32>
  }
  func.func private @expected() -> (tensor<2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>
    return %cst : tensor<2xf32>
  }
}
"""


def test_the_rewrite_drops_the_checks_and_returns_what_they_check(tmp_path):
    path = tmp_path / "abs.mlir"
    path.write_text(PROGRAM)
    program = read_program(path, "abs")
    assert [(c.kind, c.computed, c.expected) for c in program.checks] == [("expect_close", "%2", "%1")]
    assert "check." not in program.text
    assert "func.func public @main() -> (tensor<2xf32>) {" in program.text
    assert "    return %2 : tensor<2xf32>" in program.text
    assert program.expected[0].tolist() == [1.0, 2.5] and program.result_elements == ["f32"]
    eq = PROGRAM.replace(
        "stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()",
        "%3 = stablehlo.custom_call @check.eq(%1, %2) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>",
    ).replace(
        "return %2 : tensor<2xf32>\n  }\n  func.func private @inputs",
        "return %3 : tensor<i1>\n  }\n  func.func private @inputs",
    )
    path.write_text(eq)
    program = read_program(path, "abs")  # check.eq(expected, computed): the operand order is read, not assumed
    assert [(c.kind, c.computed, c.expected) for c in program.checks] == [("eq", "%2", "%1")]
    assert "return %2 : tensor<2xf32>" in program.text


def test_of_a_split_input_file_only_the_module_with_main_is_the_program(tmp_path):
    # quantized/add_qi8.mlir and its like: modules checked by check.expect_eq_const (not
    # taken; `check` is no dialect of the project's context), then the program.
    const = """module {
  func.func @add_op_test_si2() {
    %c = stablehlo.constant dense<[1, 0]> : tensor<2xi2>
    "check.expect_eq_const"(%c) <{value = dense<[1, 0]> : tensor<2xi2>}> : (tensor<2xi2>) -> ()
    return
  }
}
"""
    path = tmp_path / "add_qi8.mlir"
    path.write_text(const + "\n// -----\n\n" + PROGRAM)
    program = read_program(path, "quantized/add_qi8")
    assert "check." not in program.text and "add_op_test_si2" not in program.text
    assert [(c.kind, c.computed) for c in program.checks] == [("expect_close", "%2")]


def test_the_family_table_counts_passes_of_the_pairs_run_per_config():
    from e2e.stablehlo_testdata.__main__ import family_table

    def row(test, config, outcome):
        return {"test": f"stablehlo/{test}", "config": config, "outcome": outcome}

    rows = [
        row("scatter_add_f32_1", "a", "pass"),
        row("scatter_add_f32_1", "b", "fail"),
        row("scatter_max_i8_2", "a", "pass"),
        row("scatter_max_i8_2", "b", "pass"),
        row("abs_f32", "a", "crash"),
        row("dynamic/add_dynamic", "a", "skip"),
    ]
    table = family_table(rows)
    assert table[0] == "| family | programs | `a` | `b` |"
    assert table[2:] == [
        "| scatter | 2 | 2/2 | 1/2 |",
        "| abs | 1 | 0/1 | 0/0 |",
        "| dynamic/add | 1 | 0/0 | 0/0 |",
        "| all | 4 | 2/3 | 1/2 |",
    ]


# --- real programs of the corpus -----------------------------------------------------


@needs_corpus
def test_a_real_program_passes_on_the_refbackend(tmp_path):
    result = run("abs_float32_20_20", tmp_path)
    assert result.outcome == PASS, result.error


@needs_corpus
def test_a_programs_text_is_in_its_result_cache_key(tmp_path):
    from e2e.framework.dependencies import test_dependencies
    from e2e.stablehlo_testdata.register import register_programs

    shutil.copy(ROOT / "abs_float32_20_20.mlir", tmp_path / "abs_float32_20_20.mlir")
    before = set(registry.GLOBAL_TEST_REGISTRY)
    try:
        register_programs(tmp_path, __file__)
        test = registry.GLOBAL_TEST_REGISTRY["stablehlo/abs_float32_20_20"]
    finally:
        for name in set(registry.GLOBAL_TEST_REGISTRY) - before:
            del registry.GLOBAL_TEST_REGISTRY[name]
    assert Path(test.defined_in).resolve() == (tmp_path / "abs_float32_20_20.mlir").resolve()
    assert (tmp_path / "abs_float32_20_20.mlir").resolve() in test_dependencies(test)


@needs_corpus
@requires_extra("runtimes", "jaxlib")  # its chlo-legalize-to-stablehlo
def test_a_chlo_programs_ops_are_decomposed_in_import_and_it_passes_on_the_refbackend():
    # torch-mlir's context has no chlo dialect: jaxlib's chlo-legalize-to-stablehlo runs first.
    # In this process, as the config's compile does (a forked pair would inherit the threads
    # of any jax client an earlier test of this worker started).
    from compiler.executors import load_executor
    from compiler.stages import Snapshots, module_text, new_context, run_stage
    from e2e.stablehlo_testdata.configs import PREPARE, decompose_chlo

    program = read_program(ROOT / "acosh_float32_20_20_chlo.mlir", "acosh")
    assert "chlo.acosh" in program.text
    module = decompose_chlo(program.text, new_context())
    assert "chlo." not in module_text(module) and "stablehlo.log_plus_one" in module_text(module)
    run_stage(module, "import", PREPARE, Snapshots())
    compiled = load_executor("refbackend", input="stablehlo").program_for(module, [torch.float32], Snapshots())
    try:
        (result,) = compiled()
    finally:
        compiled.close()
    assert compare(program.checks[0], result, program.expected[0]) is None


@needs_corpus
def test_a_wrong_value_fails_in_compare_by_the_programs_check(tmp_path):
    test = program_test("abs_float32_20_20")
    wrong = registry.Test(
        test.name, lambda: _off_by_five_ulps(test.module_factory()), test.program_invoker, model_format="stablehlo"
    )
    result = run_pair(prepare(wrong), load_config(REFBACKEND), reports_dir=tmp_path, limits=Limits(300, None))
    assert result.outcome == FAIL and result.stage == "compare"
    assert "check.expect_close of result 0" in result.error and "ULP distance above 3" in result.error


def test_the_reducer_replays_a_testdata_configs_stages_as_its_executor_runs_them():
    # A crash in `lower` or `execute` is localized by replaying these entries (the
    # interpreter's aborts in `execute` on its own executor, not the RefBackend's).
    from compiler.executors import load_executor
    from e2e.reducer.localize import stage_pipelines

    configs = ((REFBACKEND, "refbackend"), ("e2e.stablehlo_testdata.configs:IREE", "iree"))
    configs += (("e2e.stablehlo_testdata.configs:INTERP", "interp"),)
    for config, name in configs:
        stages = stage_pipelines(load_config(config))
        executor = load_executor(name, input="stablehlo")
        assert stages == {"lower": list(executor.lower_entries()), "execute": list(executor.execute_entries())}
    assert any("interp_stablehlo_run" in entry for entry in stages["execute"])  # the interpreter's own run


def test_a_testdata_programs_wrong_result_is_not_searched_as_an_fx_graph():
    # The program is StableHLO: no FX graph. It falls to the last strategy, which says why no bundle.
    from types import SimpleNamespace

    from e2e.reducer.failure import PassError
    from e2e.reducer.pair import FailingPair
    from e2e.reducer.strategies import candidates

    result = SimpleNamespace(stage="compare", outcome=FAIL, failing_pass=None)
    pair = FailingPair(result, None, load_config(REFBACKEND), Path("."))
    assert [type(strategy) for strategy in candidates(pair)] == [PassError]
    assert "no MLIR pass failed (stage compare)" in PassError().reduce(pair, 1.0).note


def _off_by_five_ulps(module: StablehloProgram) -> StablehloProgram:
    module.expected = [(tensor.view(torch.int32) + 5).view(torch.float32) for tensor in module.expected]
    return module


@needs_corpus
def test_programs_are_collected_as_tests_of_the_testdata_configs_only(pytester, monkeypatch):
    corpus = pytester.mkdir("corpus")
    for name in ("abs_float32_20_20", "scatter_add_float32_1_1_1_float32_1_1"):
        shutil.copy(ROOT / f"{name}.mlir", corpus / f"{name}.mlir")
    (corpus / "dynamic").mkdir()
    shutil.copy(ROOT / "dynamic" / "add_dynamic.mlir", corpus / "dynamic" / "add_dynamic.mlir")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.delenv("STABLEHLO_TESTDATA", raising=False)
    suite = Path(__file__).parents[1] / "e2e" / "stablehlo_testdata" / "suite"
    common = ("-p", "e2e.plugin", "-p", "no:cacheprovider", "--no-reduce", "--e2e-suite", str(suite), "-rs")
    common += ("--reports-dir", str(pytester.path / "reports"))
    config = f"linalg,{REFBACKEND}"
    result = pytester.runpytest_subprocess(
        *common,
        str(suite),
        "--config",
        config,
        OPTION,
        str(corpus),
        timeout=600,
    )
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*not taken: @main takes arguments, and no inputs*"])
    rows = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert sorted((r["test"], r["config"], r["outcome"]) for r in rows) == [
        ("stablehlo/abs_float32_20_20", "testdata-refbackend", "pass"),
        ("stablehlo/scatter_add_float32_1_1_1_float32_1_1", "testdata-refbackend", "fail"),  # not bufferized
    ]
