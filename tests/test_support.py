"""The op support matrix (`python -m e2e.tools.support`), from synthetic results rows: no compiling."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from e2e.opinfo.collect import DTYPE_SUFFIX, op_key
from e2e.tools import support


def row(test, config="linalg", outcome="pass", stage=None, signature=None, final=None, **extra):
    final = final or ("passed" if outcome == "pass" else "failed")
    return {
        "test": test,
        "config": config,
        "outcome": outcome,
        "final": final,
        "stage": stage,
        "signature": signature,
        **extra,
    }


def fail(test, config, stage, signature=None, **extra):
    return row(test, config, "fail", stage, signature or f"{stage} | some-pass | no lowering", **extra)


ROWS = [
    # add: passes everywhere, 3 float32 samples and an int64 one
    *(row(f"OpInfo_add_{k}", config) for k in range(3) for config in ("linalg", "tosa@tosa-ref", "eager")),
    row("OpInfo_add_int64_0", "linalg"),
    # nn.functional.conv2d: every sample fails in backend on tosa (xfailed: still a failure)
    row("OpInfo_nn_functional_conv2d_0", "linalg"),
    row("OpInfo_nn_functional_conv2d_1", "linalg"),
    fail("OpInfo_nn_functional_conv2d_0", "tosa", "backend", final="xfailed"),
    fail("OpInfo_nn_functional_conv2d_1", "tosa", "backend", final="xfailed"),
    # max with a variant: 1 of 3 samples passes on linalg, the others fail in two stages
    row("OpInfo_max_reduction_with_dim_0", "linalg"),
    fail("OpInfo_max_reduction_with_dim_1", "linalg", "compare", "compare | value mismatch"),
    fail("OpInfo_max_reduction_with_dim_bool_0", "linalg", "compare", "compare | value mismatch"),
    # cumsum: fails in two stages on linalg, all samples
    fail("OpInfo_cumsum_0", "linalg", "torch-backend"),
    fail("OpInfo_cumsum_1", "linalg", "torch-backend"),
    fail("OpInfo_cumsum_2", "linalg", "lower"),
    # not an OpInfo sample: left out
    row("ElementwiseAddModule_basic", "linalg"),
]


def test_an_op_is_read_back_from_the_names_the_sweep_gives():
    for name, variant, op in [
        ("add", "", "add"),
        ("nn.functional.conv2d", "", "nn_functional_conv2d"),
        ("max", "reduction_with_dim", "max_reduction_with_dim"),
        ("__rsub__", "", "__rsub__"),
    ]:
        key = op_key(SimpleNamespace(name=name, variant_test_name=variant))
        assert key == op
        for dtype in (torch.float32, torch.int64, torch.bool):
            for index in (0, 2):
                matrix = support.build([row(f"OpInfo_{key}{DTYPE_SUFFIX[dtype]}_{index}")])
                assert list(matrix.ops) == [op]


def test_cells_pass_stage_and_partial():
    matrix = support.build(ROWS)
    assert list(matrix.ops) == ["add", "cumsum", "max_reduction_with_dim", "nn_functional_conv2d"]
    assert matrix.skipped_rows == 1
    cell = lambda op, config: matrix.ops[op][config]
    assert cell("add", "linalg").text() == "pass" and cell("add", "linalg").samples == 4
    assert cell("nn_functional_conv2d", "linalg").text() == "pass"
    assert cell("nn_functional_conv2d", "tosa").text() == "backend"  # xfailed counts as failing
    assert cell("nn_functional_conv2d", "tosa").status == support.FAIL
    assert cell("max_reduction_with_dim", "linalg").text() == "partial 1/3"
    assert cell("max_reduction_with_dim", "linalg").signature == "compare | value mismatch"
    assert cell("cumsum", "linalg").text() == "torch-backend+lower"
    assert cell("cumsum", "linalg").signature == "torch-backend | some-pass | no lowering"
    assert "tosa" not in matrix.ops["add"]


def test_columns_built_in_first_then_runtime_and_counts():
    matrix = support.build(ROWS)
    assert matrix.configs == ["linalg", "tosa", "eager", "tosa@tosa-ref"]
    assert matrix.counts("linalg") == {"pass": 2, "partial": 1, "fail": 1}
    assert matrix.counts("tosa") == {"fail": 1}
    assert matrix.counts("tosa@tosa-ref") == {"pass": 1}
    assert "linalg     2 /    1 /    1" in support.summary(matrix)


def test_markdown_table_footnotes_and_links(tmp_path):
    bundle = tmp_path / "repro" / "cumsum"
    bundle.mkdir(parents=True)
    rows = [r if r["test"] != "OpInfo_cumsum_2" else {**r, "repro_path": str(bundle)} for r in ROWS]
    matrix = support.build(rows, {"torch": "2.13.0+cpu (/x)", "torch_mlir": "20261001 (/y)", "jit_target": "v2"})
    page = support.render_markdown(matrix, tmp_path / "support.md")
    assert "| config | ops | pass | partial | fail |" in page
    assert "| linalg | 4 | 2 | 1 | 1 |" in page
    assert "torch 2.13.0+cpu · torch-mlir 20261001 · JIT target v2" in page
    assert "Expected failures (xfail entries) count as failures" in page
    notes = {s: i + 1 for i, s in enumerate(matrix.signatures())}
    k = notes["torch-backend | some-pass | no lowering"]
    assert f"| `cumsum` | [torch-backend+lower](repro/cumsum) [{k}] | - | - | - |" in page
    assert f"{k}. `torch-backend | some-pass | no lowering`" in page
    assert "| `add` | pass | - | pass | pass |" in page
    assert support.REGENERATE in page and "--shard I/4" in page
    # a bundle outside the page's folder is not linked from markdown, only from HTML
    elsewhere = support.render_markdown(matrix, tmp_path / "docs" / "support.md")
    assert "](../repro/cumsum)" not in elsewhere and "1 cells have a reproducer bundle outside" in elsewhere
    assert 'href="../repro/cumsum"' in support.render_html(matrix, tmp_path / "docs" / "support.html")


def test_html_has_tooltips_and_classes(tmp_path):
    page = support.render_html(support.build(ROWS), tmp_path / "support.html")
    assert '<td class="partial" data-config="linalg" title="compare | value mismatch (2 of 3)">partial 1/3' in page
    assert '<td class="pass" data-config="linalg">pass</td>' in page
    assert "Expected failures (xfail entries) count as failures" in page


def test_main_reads_reports_dirs_and_says_it_is_the_ci_slice(tmp_path, capsys):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run = {"command": "pytest --opinfo-slice ci -n 2", "torch": "2.13.0+cpu", "status": "finished"}
    (reports / "run.json").write_text(json.dumps(run))
    out, html_page = tmp_path / "docs" / "support.md", tmp_path / "support.html"
    assert support.main([str(reports), "-o", str(out), "--html", str(html_page)]) == 0
    assert "CI slice" in out.read_text() and "torch 2.13.0+cpu" in out.read_text()
    data = json.loads(out.with_suffix(".json").read_text())  # the statuses as data, beside the page
    assert data["format"] == support.STATUSES_FORMAT and set(data["configs"]) <= set(support.SWEEP_CONFIGS)
    assert {status for row in data["ops"].values() for status in row.values()} <= {"pass", "partial", "fail"}
    assert "CI slice" in html_page.read_text()
    assert "4 ops" in capsys.readouterr().out
    # a pair in two inputs is refused, as e2e.tools.merge refuses it
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    assert support.main([str(reports), str(other)]) == 2
    assert support.main([str(tmp_path / "nothing")]) == 2


@pytest.mark.parametrize("rows", [[row("ElementwiseAddModule_basic")]])
def test_no_opinfo_rows_is_an_error(tmp_path, rows):
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert support.main([str(tmp_path)]) == 2


def test_a_sweep_shard_uses_only_options_that_exist_and_keeps_the_plan_cache_free():
    command = support.shard_command(2, 4, support.SWEEP_CONFIGS, Path("work"), 2)
    assert command[1:3] == ["-m", "pytest"] and command[command.index("--shard") + 1] == "2/4"
    assert command[command.index("--reports-dir") + 1] == str(Path("work") / "shard-2")
    assert "no:cacheprovider" in command and "--no-reduce" in command
    configs = command[command.index("--config") + 1].split(",")
    assert configs[:6] == ["linalg", "tosa", "stablehlo", "ltc", "torchscript", "eager"]
    assert "torch@iree" in configs and not any(c.startswith("onnx") for c in configs)
    options = (Path(__file__).resolve().parents[1] / "e2e" / "hooks" / "options.py").read_text()
    for option in (word for word in command if word.startswith("--")):
        assert f'"{option}"' in options, option


def test_sweep_and_results_together_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        support.main([str(tmp_path), "--sweep", "2"])
    assert exit_info.value.code == 2
