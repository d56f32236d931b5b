"""What StableHLO's testdata tells about the `stablehlo` config's verdicts: the op under
test of a program, the ops of a lowered program, and failing pairs explained (or not) by
programs that fail alone on `testdata-refbackend` and pass on `testdata-interp`. The
programs are small ones written here, in the corpus's form."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.stages import Snapshots
from e2e.framework.runner import pair_ir_dir
from e2e.stablehlo_testdata.__main__ import main
from e2e.stablehlo_testdata.ops import OpUse, op_under_test, program_ops
from tests.extras import requires_extra


def program(body: str, inputs: str, result: str, helpers: str = "", expected: str | None = None) -> str:
    """A testdata program: `@main` runs `body` on `%0` (what `@inputs()` returns: ones) and
    checks `%2` against `expected` (default: ones)."""
    one, expected_one = ("1.0" if "xf" in type_ else "1" for type_ in (inputs, result))
    expected_one = expected or expected_one
    return f"""module @jit_main {{
  func.func public @main() -> (tensor<{result}> {{jax.result_info = ""}}) {{
    %0 = call @inputs() : () -> {inputs}
    %1 = call @expected() : () -> tensor<{result}>
{body}
    stablehlo.custom_call @check.expect_eq(%2, %1) {{has_side_effect = true}} : (tensor<{result}>, tensor<{result}>) -> ()
    return %2 : tensor<{result}>
  }}
  func.func private @inputs() -> {inputs} {{
    %cst = stablehlo.constant dense<{one}> : {inputs}
    return %cst : {inputs}
  }}
  func.func private @expected() -> tensor<{result}> {{
    %cst = stablehlo.constant dense<{expected_one}> : tensor<{result}>
    return %cst : tensor<{result}>
  }}
{helpers}}}
"""


ABS = program("    %2 = stablehlo.abs %0 : tensor<4xf32>", "tensor<4xf32>", "4xf32")
CONVERT = program("    %2 = stablehlo.convert %0 : (tensor<4xi32>) -> tensor<4xf16>", "tensor<4xi32>", "4xf16")
# A broadcast of an operand is around the op under test, not it.
DIVIDE = program(
    "    %3 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<4xf32>) -> tensor<4xf32>\n"
    "    %2 = stablehlo.divide %3, %0 : tensor<4xf32>",
    "tensor<4xf32>",
    "4xf32",
)
# Named after none of its ops, and more than one kind: a composite, no one op's failure.
COMPOSITE = program(
    "    %3 = stablehlo.compare GT, %0, %0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n"
    "    %2 = stablehlo.select %3, %0, %0 : tensor<4xi1>, tensor<4xf32>",
    "tensor<4xf32>",
    "4xf32",
)
# JAX's helper functions: the op is in `@cumsum`.
CUMSUM = program(
    "    %2 = call @cumsum(%0) : (tensor<4xf32>) -> tensor<4xf32>",
    "tensor<4xf32>",
    "4xf32",
    helpers="""  func.func private @cumsum(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{padding = dense<[[3, 0]]> : tensor<1x2xi64>, window_dimensions = array<i64: 4>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
""",
)
SCATTER_BODY = """    %2 = "stablehlo.scatter"(%0, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>, tensor<1x1xi32>, tensor<1xf32>) -> tensor<4xf32>"""
SCATTER = program(
    "    %i = stablehlo.constant dense<1> : tensor<1x1xi32>\n"
    "    %u = stablehlo.constant dense<2.0> : tensor<1xf32>\n" + SCATTER_BODY,
    "tensor<4xf32>",
    "4xf32",
    expected="[1.0, 3.0, 1.0, 1.0]",
)
# torch-mlir's context has no chlo dialect: read by its lines.
CHLO = program("    %2 = chlo.acosh %0 : tensor<4xf32> -> tensor<4xf32>", "tensor<4xf32>", "4xf32")


@pytest.mark.parametrize(
    "text, name, expected",
    [
        (ABS, "abs_float32_4", OpUse("stablehlo.abs", "f32")),
        (CONVERT, "convert_int32_float16", OpUse("stablehlo.convert", "i32->f16")),
        (DIVIDE, "div_float32_4_float32_4", OpUse("stablehlo.divide", "f32")),
        (COMPOSITE, "max_float32_4", None),
        (COMPOSITE, "select_float32_4", OpUse("stablehlo.select", "f32")),  # named after it
        (CUMSUM, "cumsum_float32_4", OpUse("stablehlo.reduce_window", "f32")),
        (SCATTER, "scatter_add_float32_4", OpUse("stablehlo.scatter", "f32")),
        (CHLO, "acosh_float32_4_chlo", OpUse("chlo.acosh", "f32")),
    ],
)
def test_the_op_under_test_is_read_from_main(text, name, expected):
    assert op_under_test(text, name) == expected


def lowered(arguments: str, body: str, result: str) -> str:
    """A program as the `stablehlo` config's stage `lower` is given it."""
    return f"module {{\n  func.func @main({arguments}) -> {result} {{\n{body}\n  }}\n}}\n"


SCATTER_LOWERED = lowered(
    "%0: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf32>",
    SCATTER_BODY.replace("tensor<1x1xi32>", "tensor<1x1xi64>") + "\n    return %2 : tensor<4xf32>",
    "tensor<4xf32>",
)


def test_a_programs_ops_include_nested_ones_on_their_element_types():
    compared = SCATTER_LOWERED.replace(
        "return %2 : tensor<4xf32>",
        "%3 = stablehlo.compare GT, %2, %0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n"
        "    return %3 : tensor<4xi1>",
    ).replace("-> tensor<4xf32> {", "-> tensor<4xi1> {")
    assert program_ops(compared) == {
        OpUse("stablehlo.scatter", "f32"),
        OpUse("stablehlo.add", "f32"),  # in the scatter's region
        OpUse("stablehlo.compare", "f32->i1"),
    }


# --- failing pairs explained, from a run's files ----------------------------------------


def write_pair_ir(reports: Path, test: str, stablehlo: str) -> None:
    snapshots = Snapshots(pair_ir_dir(reports, test, "stablehlo"))
    snapshots.record("lower", stablehlo)


def row(test: str, config: str, outcome: str, stage: str | None = None, signature: str | None = None) -> dict:
    return {"test": test, "config": config, "outcome": outcome, "stage": stage, "signature": signature}


BUFFERIZE = "lower | one-shot-bufferize | loc: op was not bufferized"


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in {
        "scatter_add_float32_4": SCATTER,
        "abs_float32_4": ABS,
        "convert_int32_float16": CONVERT,
        "max_float32_4": COMPOSITE,
    }.items():
        (root / f"{name}.mlir").write_text(text)
    return root


def explain(corpus: Path, results: Path, testdata: Path, capsys) -> list[str]:
    assert main(["--explain", str(results), "--testdata-results", str(testdata), "--dir", str(corpus)]) == 0
    return capsys.readouterr().out.splitlines()


def test_failing_pairs_are_explained_by_ops_that_fail_alone_on_the_refbackend_and_pass_on_the_interpreter(
    tmp_path, corpus, capsys
):
    testdata = tmp_path / "testdata.json"
    testdata.write_text(
        json.dumps(
            [
                row("stablehlo/scatter_add_float32_4", "testdata-refbackend", "fail", "lower", BUFFERIZE),
                row("stablehlo/scatter_add_float32_4", "testdata-interp", "pass"),
                row("stablehlo/abs_float32_4", "testdata-refbackend", "pass"),
                row("stablehlo/abs_float32_4", "testdata-interp", "pass"),
                # Fails on both: the program, not the conversion, is in doubt.
                row("stablehlo/convert_int32_float16", "testdata-refbackend", "fail", "compare", "compare | -"),
                row("stablehlo/convert_int32_float16", "testdata-interp", "fail", "compare", "compare | -"),
                # A composite: no one op to blame.
                row("stablehlo/max_float32_4", "testdata-refbackend", "fail", "compare", "compare | -"),
                row("stablehlo/max_float32_4", "testdata-interp", "pass"),
            ]
        )
    )
    reports = tmp_path / "reports"
    reports.mkdir()
    convert_ir = lowered(
        "%0: tensor<4xi32>",
        "    %1 = stablehlo.convert %0 : (tensor<4xi32>) -> tensor<4xf16>\n    return %1 : tensor<4xf16>",
        "tensor<4xf16>",
    )
    write_pair_ir(reports, "IndexPut", SCATTER_LOWERED)
    write_pair_ir(reports, "ConvertToHalf", convert_ir)
    (reports / "results.json").write_text(
        json.dumps(
            [
                row("IndexPut", "stablehlo", "fail", "lower", BUFFERIZE),
                row("ConvertToHalf", "stablehlo", "fail", "compare", "compare | values"),
                row("Gcd", "stablehlo", "fail", "torch-backend", "torch-backend | torch-reduce-op-variants | x"),
                row("Passing", "stablehlo", "pass"),
                row("IndexPut", "linalg", "fail", "lower", BUFFERIZE),  # another config: not asked about
            ]
        )
    )
    lines = explain(corpus, reports, testdata, capsys)
    text = "\n".join(lines)
    assert "IndexPut  (fail: lower | one-shot-bufferize | loc: op was not bufferized)" in lines
    assert (
        "    explained: stablehlo.scatter on f32: 1 testdata programs fail on testdata-refbackend and pass on "
        "testdata-interp (1 failing as this pair does): stablehlo/scatter_add_float32_4" in lines
    )
    assert "    not explained: failed in stage torch-backend, before StableHLO" in lines
    assert "    not explained: none of its 1 ops on their element types fails alone in the testdata" in lines
    assert "Passing" not in text and "linalg" not in text
    assert lines[-2].startswith("testdata: 1 programs fail on testdata-refbackend (results ")
    assert lines[-1] == (
        "stablehlo: 3 failing pairs: explained 1 (1 failing as their testdata programs do), not explained 2 "
        "(1 failed before StableHLO, 0 without saved StableHLO, 1 whose ops pass alone)"
    )

    # Without the interpreter's verdicts in the testdata results, its recorded xfail set decides;
    # without the pair's saved StableHLO (a cached result), the pair says so.
    rows = json.loads(testdata.read_text())
    testdata.write_text(json.dumps([r for r in rows if r["config"] == "testdata-refbackend"]))
    (pair_ir_dir(reports, "IndexPut", "stablehlo") / "4-lower.mlir").unlink()
    lines = explain(corpus, reports, testdata, capsys)
    assert "testdata-interp (xfail set " in lines[-2]
    assert "    not explained: no saved StableHLO (a result from the cache? rerun with --no-result-cache)" in lines


# --- real runs: the testdata configs on these programs, the stablehlo config on the suite ---

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = "e2e.stablehlo_testdata.configs"
# A scatter on f32 (not converted to linalg, as the testdata's scatters), a test that fails
# before StableHLO, and a passing one.
E2E_TESTS = "BackwardEmbedding_DenseBackward or BackwardOp_Silu or Activation_GeluTanh"


def run_suite(reports: Path, *arguments: str) -> None:
    command = [
        sys.executable, "-m", "pytest", "-p", "e2e.plugin", "-q", "-p", "no:cacheprovider", "--no-reduce",
        "--no-result-cache", "--reports-dir", str(reports), *arguments,
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, env=environment)
    assert (reports / "results.json").exists(), f"the run wrote no results:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def testdata_reports(tmp_path_factory) -> Path:
    """A real run of the testdata suite on two programs written here, on the RefBackend and the interpreter."""
    base = tmp_path_factory.mktemp("testdata-run")
    corpus = base / "corpus"
    corpus.mkdir()
    (corpus / "scatter_add_float32_4.mlir").write_text(SCATTER)
    (corpus / "abs_float32_4.mlir").write_text(ABS)
    suite = ROOT / "e2e" / "stablehlo_testdata" / "suite"
    run_suite(
        base / "reports", str(suite), "--e2e-suite", str(suite), "--stablehlo-testdata", str(corpus),
        "--config", f"{TESTDATA}:REFBACKEND,{TESTDATA}:INTERP",
    )  # fmt: skip
    return base / "reports"


@requires_extra("runtimes", "jax", "jaxlib")  # the interpreter's pairs
def test_a_run_of_testdata_configs_shows_its_op_families_in_the_html_report(testdata_reports):
    rows = json.loads((testdata_reports / "results.json").read_text())
    outcomes = {(r["test"], r["config"]): r["outcome"] for r in rows}
    assert outcomes == {
        ("stablehlo/abs_float32_4", "testdata-interp"): "pass",
        ("stablehlo/abs_float32_4", "testdata-refbackend"): "pass",
        ("stablehlo/scatter_add_float32_4", "testdata-interp"): "pass",
        ("stablehlo/scatter_add_float32_4", "testdata-refbackend"): "fail",
    }
    page = (testdata_reports / "index.html").read_text()
    section = re.search(r'<section id="testdata-families">.*?</section>', page, re.S)
    assert section is not None, "the page has no table of the testdata's op families"
    cells = [re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", section.group(0))]
    assert cells == [
        ["family", "programs", "testdata-interp", "testdata-refbackend"],
        ["abs", "1", "1/1", "1/1"],
        ["scatter", "1", "1/1", "0/1"],
        ["all", "2", "2/2", "1/2"],
    ]


def test_a_run_without_testdata_configs_has_no_such_table(tmp_path):
    from e2e.framework.html_report import render_html
    from e2e.tools.report_tables import report_tables

    rows = [{"test": "A", "config": "linalg", "final": "passed", "outcome": "pass"}]
    assert report_tables(rows) == []
    assert "testdata-families" not in render_html(rows, {}, tmp_path, report_tables(rows))


@requires_extra("runtimes", "jax", "jaxlib")  # the interpreter's pairs
def test_a_real_stablehlo_run_is_explained_by_a_real_testdata_run(testdata_reports, tmp_path, capsys):
    reports = tmp_path / "e2e"
    run_suite(reports, "e2e", "--config", "stablehlo", "-k", E2E_TESTS)
    corpus = testdata_reports.parent / "corpus"
    lines = explain(corpus, reports, testdata_reports, capsys)
    text = "\n".join(lines)
    assert "BackwardEmbedding_DenseBackward  (fail: lower | one-shot-bufferize" in text
    assert "explained: stablehlo.scatter on f32: 1 testdata programs" in text
    assert "(1 failing as this pair does): stablehlo/scatter_add_float32_4" in text
    assert "    not explained: failed in stage torch-backend, before StableHLO" in lines  # BackwardOp_Silu
    assert "Activation_GeluTanh" not in text  # it passes
    assert lines[-1].startswith("stablehlo: 2 failing pairs: explained 1 (1 failing as their testdata programs do)")
