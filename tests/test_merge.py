"""`python -m e2e.tools.merge`: the shards of a small real run, merged, are the unsharded run
(pairs, outcomes, signatures, the xfail updater's verdicts); overlapping pairs, missing
shards, shards split differently and mixed compilers are refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from e2e.configs.update_xfails import update
from e2e.tools.merge import MergeError, main, merge

ROOT = Path(__file__).resolve().parents[1]
SUITE = """
import torch
from e2e.framework import op_test

op_test("Tanh", torch.tanh, lambda tu: [tu.rand(2, 3)])
op_test("Mm", torch.mm, lambda tu: [tu.rand(2, 3), tu.rand(3, 4)], dynamic=True)  # tosa: dynamic dims
op_test("Atan2", torch.atan2, lambda tu: [tu.rand(2, 3), tu.rand(2, 3)])  # tosa: no atan2 (xfailed)
op_test("Sin", torch.sin, lambda tu: [tu.rand(2, 3)])
op_test("Exp", torch.exp, lambda tu: [tu.rand(4)])
op_test("Cos", torch.cos, lambda tu: [tu.rand(3)])
"""
XFAIL_TOSA = "Atan2  # fail: backend | convert-torch-to-tosa\n"


def pytest_run(directory: Path, reports: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--no-reduce", "--e2e-suite", "suite"]
    command += ["--config", "linalg,tosa", "--xfail-dir", "xfails", "--reports-dir", reports, *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The suite run whole, and as shard 1/2 and shard 2/2 (under xdist: its workers must
    compute the same plan as a single process), each shard with a --baseline."""
    directory = tmp_path_factory.mktemp("runs")
    (directory / "suite").mkdir()
    (directory / "suite" / "ops.py").write_text(SUITE)
    (directory / "xfails").mkdir()
    (directory / "xfails" / "tosa.txt").write_text(XFAIL_TOSA)
    done = {"full": pytest_run(directory, "full")}
    # A baseline in which every linalg pair failed: each shard's linalg pairs newly pass.
    rows = json.loads((directory / "full" / "results.json").read_text())
    for row in rows:
        if row["config"] == "linalg":
            row.update(outcome="fail", final="failed", stage="backend", signature="backend | some-pass | broken")
    (directory / "linalg_broken.json").write_text(json.dumps(rows))
    done["s1"] = pytest_run(directory, "s1", "--shard", "1/2", "--baseline", "full")
    done["s2"] = pytest_run(directory, "s2", "--shard", "2/2", "-n", "2", "--baseline", "linalg_broken.json")
    for name, result in done.items():
        assert result.returncode in (0, 1), (name, result.stdout[-3000:], result.stderr[-3000:])
    # Mm fails on tosa: in the whole run, and in the one shard that has it.
    assert done["full"].returncode == 1 and sorted([done["s1"].returncode, done["s2"].returncode]) == [0, 1]
    return {"dir": directory, **done}


def outcomes(rows: list[dict]) -> dict:
    return {(r["test"], r["config"]): (r["outcome"], r["final"], r["signature"]) for r in rows}


def read(path: Path):
    return json.loads(path.read_text())


def test_merged_shards_are_the_unsharded_run(runs, tmp_path):
    directory = runs["dir"]
    full = read(directory / "full" / "results.json")
    shards = [read(directory / name / "results.json") for name in ("s1", "s2")]
    assert len(full) == 12 and all(shards) and sum(len(s) for s in shards) == 12
    plans = [read(directory / name / "run.json")["shard"] for name in ("s1", "s2")]
    assert [p["index"] for p in plans] == [1, 2] and plans[0]["plan"] == plans[1]["plan"]
    assert plans[0]["items"] + plans[1]["items"] == plans[0]["total_items"] == 12
    assert "shard 2/2: " in runs["s2"].stdout and f"(plan {plans[1]['plan']};" in runs["s2"].stdout

    run = merge([directory / "s1", directory / "s2"], tmp_path / "merged")
    merged = read(tmp_path / "merged" / "results.json")
    assert outcomes(merged) == outcomes(full)
    assert ("Mm", "tosa") in outcomes(full) and outcomes(full)[("Atan2", "tosa")][1] == "xfailed"
    assert run["status"] == "finished" and run["rows"] == 12
    assert [m["shard"] for m in run["merged_from"]] == ["1/2", "2/2"]
    assert read(tmp_path / "merged" / "run.json")["run_id"] == run["run_id"]
    jsonl = [json.loads(line) for line in (tmp_path / "merged" / "results.jsonl").read_text().splitlines()]
    assert jsonl == merged
    # The failing pair's saved IR came along, and its row points at the copy.
    (mm_tosa,) = [r for r in merged if (r["test"], r["config"]) == ("Mm", "tosa")]
    assert mm_tosa["ir_path"].startswith(str((tmp_path / "merged").resolve())) and Path(mm_tosa["ir_path"]).is_file()
    page = (tmp_path / "merged" / "index.html").read_text()
    assert all(f'"{test}"' in page for test in ("Tanh", "Mm", "Atan2", "Sin", "Exp", "Cos"))
    assert f"shard 1/2: {len(shards[0])} pairs finished in " in page  # the run table names each shard


def test_the_merged_junit_xml_has_a_testcase_per_pair_with_the_e2e_properties(runs, tmp_path):
    directory = runs["dir"]
    merge([directory / "s1", directory / "s2"], tmp_path / "merged")
    suite = ET.parse(tmp_path / "merged" / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("12", "1", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert len(cases) == 12
    failing = cases[("suite.ops.Mm", "tosa")]
    properties = {p.get("name"): p.get("value") for p in failing.iter("property")}
    assert failing.find("failure") is not None and properties["e2e_stage"] == "backend"
    assert properties["e2e_signature"].startswith("backend | ")
    assert cases[("suite.ops.Atan2", "tosa")].find("skipped").get("type") == "pytest.xfail"
    assert cases[("suite.ops.Tanh", "linalg")].find("failure") is None


def test_e2e_diff_finds_nothing_between_the_merged_shards_and_the_unsharded_run(runs, tmp_path, capsys):
    from e2e.tools.diff import main as diff

    directory = runs["dir"]
    merge([directory / "s1", directory / "s2"], tmp_path / "merged")
    # Outcomes only: how long a pair took is not the same from one run to the next.
    assert diff([str(directory / "full"), str(tmp_path / "merged"), "--time-factor", "1e9"]) == 0
    assert "0 pairs changed; no new failure" in capsys.readouterr().out


def test_the_xfail_updater_reads_the_merged_results_as_it_reads_the_unsharded_ones(runs, tmp_path):
    directory = runs["dir"]
    merge([directory / "s1", directory / "s2"], tmp_path / "merged")
    for name in ("from_merged", "from_full"):
        shutil.copytree(directory / "xfails", tmp_path / name)
    update(tmp_path / "merged", tmp_path / "from_merged")  # a reports directory will do
    update(directory / "full" / "results.json", tmp_path / "from_full")
    merged_sets = {p.name: p.read_text() for p in (tmp_path / "from_merged").iterdir()}
    assert merged_sets == {p.name: p.read_text() for p in (tmp_path / "from_full").iterdir()}
    assert "Mm  # fail: backend | " in merged_sets["tosa.txt"] and merged_sets["linalg.txt"] == ""


def test_overlapping_pairs_and_missing_shards_are_refused(runs, tmp_path, capsys):
    directory = runs["dir"]
    with pytest.raises(MergeError, match=r"pairs are in more than one input:\n  \w+ on (linalg|tosa): in .*s1"):
        merge([directory / "s1", directory / "full"], tmp_path / "out")
    with pytest.raises(MergeError, match=r"missing shard 2/2"):
        merge([directory / "s1"], tmp_path / "out")
    with pytest.raises(MergeError, match="one reports directory: give it once"):
        merge([directory / "s1", directory / "s1" / "results.json"], tmp_path / "out")
    with pytest.raises(MergeError, match="is one of the inputs"):
        merge([directory / "s1", directory / "s2"], directory / "s2")
    assert not (tmp_path / "out").exists()  # nothing written when refused
    run = merge([directory / "s1"], tmp_path / "partial", allow_missing=True)
    assert run["status"] == "incomplete" and "missing shard 2/2" in run["missing"][0]
    assert main([str(directory / "s1"), str(directory / "full"), "-o", str(tmp_path / "cli")]) == 2
    assert "e2e.tools.merge: " in capsys.readouterr().err


def diff_table(output: str) -> dict[str, list[str]]:
    """The rows of the printed diff table: config -> [base, new, newly failing, newly
    passing, other signature, other change, added, removed, slower]."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("config  base  new"))
    table = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        config, *cells = line.split()
        table[config] = cells
    return table


def test_baseline_prints_what_changed_for_the_pairs_the_shard_ran(runs):
    directory = runs["dir"]
    ran = [read(directory / name / "results.json") for name in ("s1", "s2")]
    same = runs["s1"].stdout
    assert "e2e changes since the baseline" in same
    assert f"baseline: full ({len(ran[0])} of its 12 pairs are of the tests and configs this run ran)" in same
    # No outcome changed, and the other shard's pairs are not `removed` (a pair's time
    # may differ: the last column is left alone).
    table = diff_table(same)
    assert table["all"][:2] == [str(len(ran[0]))] * 2
    assert all(cells[2:8] == ["."] * 6 for cells in table.values()), table
    assert "no new failure" in same
    fixed = runs["s2"].stdout  # under xdist: the controller compares
    linalg = sorted(r["test"] for r in ran[1] if r["config"] == "linalg")
    table = diff_table(fixed)
    assert table["linalg"][2:8] == [".", str(len(linalg)), ".", ".", ".", "."], table
    assert table["tosa"][2:8] == ["."] * 6 and "no new failure" in fixed
    assert f"newly passing ({len(linalg)}):" in fixed
    for test in linalg:
        assert f"linalg  {test}: failed (fail: backend | some-pass) -> passed" in fixed
    # Its HTML report marks those pairs, and only those; the other shard's page marks none.
    assert marked(directory / "s2" / "index.html") == {
        (test, "linalg"): "newly passing: failed (fail: backend | some-pass) -> passed" for test in linalg
    }
    assert marked(directory / "s1" / "index.html") == {}


def marked(page: Path) -> dict[tuple[str, str], str]:
    """The cells an HTML report marks as changed since its baseline, with their change of
    outcome (a pair that also got slower on a loaded machine says so too: left out here)."""
    text = page.read_text()
    data = json.loads(text.split('id="e2e-data">', 1)[1].split("</script>", 1)[0])
    changes = {
        (data["tests"][c["t"]], data["configs"][c["c"]]): [m for m in c["x"].split("; ") if not m.startswith("slower:")]
        for c in data["cells"]
        if "x" in c
    }
    return {pair: "; ".join(marks) for pair, marks in changes.items() if marks}


def test_a_merge_with_a_baseline_marks_the_changed_pairs(runs, tmp_path):
    directory = runs["dir"]
    merged = tmp_path / "merged"
    assert main([str(directory / "s1"), str(directory / "s2"), "-o", str(merged), "--baseline",
                       str(directory / "linalg_broken.json")]) == 0  # fmt: skip
    linalg = {r["test"] for r in read(directory / "full" / "results.json") if r["config"] == "linalg"}
    assert set(marked(merged / "index.html")) == {(test, "linalg") for test in linalg}
    # Without one, nothing is marked.
    assert main([str(directory / "s1"), str(directory / "s2"), "-o", str(tmp_path / "plain")]) == 0
    assert marked(tmp_path / "plain" / "index.html") == {}


# --- synthetic runs -----------------------------------------------------------------------


def write_run(directory: Path, rows: list[dict], **run) -> Path:
    directory.mkdir(parents=True)
    (directory / "results.json").write_text(json.dumps(rows))
    (directory / "run.json").write_text(json.dumps({"status": "finished", "torch": "2.13.0+cpu (/a)", **run}))
    return directory


def row(test: str, config: str = "linalg", outcome: str = "pass", **extra) -> dict:
    final = {"pass": "passed"}.get(outcome, "failed")
    return {"test": test, "config": config, "outcome": outcome, "final": final, "signature": None, **extra}


def test_shards_split_with_different_durations_are_refused_with_the_reason(tmp_path):
    a = write_run(tmp_path / "a", [row("A")], shard={"index": 1, "count": 2, "plan": "aaaa"})
    b = write_run(tmp_path / "b", [row("B")], shard={"index": 2, "count": 2, "plan": "bbbb"})
    with pytest.raises(MergeError, match=r"(?s)missing shard 2/2.*missing shard 1/2.*same --shard-durations"):
        merge([a, b], tmp_path / "out")
    twice = write_run(tmp_path / "c", [row("C")], shard={"index": 1, "count": 2, "plan": "aaaa"})
    with pytest.raises(MergeError, match=r"shard 1/2 given 2 times"):
        merge([a, twice], tmp_path / "out")


def test_runs_of_different_compilers_are_refused(tmp_path):
    a = write_run(tmp_path / "a", [row("A")], torch_mlir="20261001 (/x)")
    b = write_run(tmp_path / "b", [row("B")], torch_mlir="20261101 (/y)")
    with pytest.raises(MergeError, match="different torch_mlir: 20261001 .*, 20261101"):
        merge([a, b], tmp_path / "out")
    # The paths the versions were imported from may differ: the versions do not.
    c = write_run(tmp_path / "c", [row("C")], torch_mlir="20261001 (/elsewhere)")
    assert merge([a, c], tmp_path / "out")["torch_mlir"] == "20261001 (/x)"


def test_each_merged_row_is_judged_on_its_own_shards_platform(tmp_path):
    """Shards on an AVX2 and an AVX-512 machine: an entry for AVX2 only is dropped when the
    test passes on the AVX2 shard, one for AVX-512 only stays."""
    on_avx2 = write_run(tmp_path / "a", [row("C"), row("A")], platform="avx2")
    on_avx512 = write_run(tmp_path / "b", [row("B")], platform="avx512")
    merge([on_avx2, on_avx512], tmp_path / "merged")
    rows = read(tmp_path / "merged" / "results.json")
    assert {r["test"]: r["platform"] for r in rows} == {"A": "avx2", "B": "avx512", "C": "avx2"}
    assert read(tmp_path / "merged" / "run.json")["platform"] == "avx2, avx512"
    xfails = tmp_path / "xfails"
    xfails.mkdir()
    (xfails / "linalg.txt").write_text(
        "A @avx512  # fail: compare | nan\nB  # fail: compare | nan\nC @avx2  # fail: compare | nan\n"
    )
    update(tmp_path / "merged" / "results.json", xfails)
    assert (xfails / "linalg.txt").read_text() == "A @avx512  # fail: compare | nan\n"


def test_a_row_sharing_an_earlier_inputs_bundle_points_into_the_merged_run(tmp_path):
    """A campaign's blocks share one claim index: a later block's failure may point at the
    bundle an earlier block wrote; merged, it points at that bundle's copy."""
    bundle = tmp_path / "block0" / "repro" / "Gen_1" / "linalg"
    first = write_run(tmp_path / "block0", [row("Gen_1", outcome="fail", repro_path=str(bundle))])
    bundle.mkdir(parents=True)
    (bundle / "case.json").write_text("{}")
    second = write_run(tmp_path / "block1", [row("Gen_9", outcome="fail", repro_path=str(bundle))])
    merge([first, second], tmp_path / "merged")
    copy = str((tmp_path / "merged" / "repro" / "Gen_1" / "linalg").resolve())
    assert {r["test"]: r["repro_path"] for r in read(tmp_path / "merged" / "results.json")} == {
        "Gen_1": copy,
        "Gen_9": copy,
    }
