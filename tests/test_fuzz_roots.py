"""A campaign's verdict facts as fields, its bugs' roots and known by root, on small data
made here (Results, Failures, bugs; no campaign run)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.framework.result import Result
from e2e.framework.signature import Signature
from e2e.fuzz.bugs import COMPILE, WRONG, Bug, Classified, Failure, KnownSignatures, classify
from e2e.fuzz.programs import seed_of
from e2e.reducer.outcome import ReduceOutcome

LINALG = "func.func(convert-torch-to-linalg{allow-non-finites=true})"
VIEW = "torch.aten.view"


def reduced(test: str, config: str, signature: str, guilty: str | None, step: str | None, **more) -> Result:
    """A failing pair the reducer bundled (verified), with its findings as fields."""
    stage = signature.split(" | ")[0]
    return Result(
        test,
        config,
        "fail",
        stage=stage,
        signature=Signature.parse(signature),
        repro_path=f"/nonexistent/repro/{test}/{config}",
        guilty_op=guilty,
        failing_step=step,
        **more,
    )


def known_on(tmp_path: Path, entries: dict[str, str]) -> KnownSignatures:
    """The hand-written suites' xfail entries, config -> its file's text."""
    for config, text in entries.items():
        (tmp_path / f"{config}.txt").write_text(text)
    return KnownSignatures.load(tmp_path, list(entries), generated=lambda test: seed_of(test) is not None)


def test_a_result_row_carries_the_check_and_the_reducers_findings_and_old_rows_still_load():
    result = reduced("Gen_1", "linalg", "compare | values", VIEW, LINALG, check="rounding band", types_root="r")
    back = Result.from_json(json.loads(json.dumps(result.to_json())))
    assert back == result
    old = {"test": "Gen_1", "config": "linalg", "outcome": "fail", "stage": "compare", "signature": "compare | nan",
           "notes": ["reducer: types root: a fold"], "final": "failed", "nodeid": "x", "run_id": "r"}  # fmt: skip
    read = Result.from_json(old)  # a results file's own columns left out; the new fields their defaults
    assert read.signature == Signature("compare", "nan") and read.types_root is None and read.check is None


def test_the_runner_gives_the_result_the_check_that_ruled():
    """The oracle's Explanation (`check`, an acquittal or a move) lands in the Result's fields."""
    from types import SimpleNamespace

    from e2e.framework.judge import Explanation, Outcome
    from e2e.framework.runner import _result_of

    test = SimpleNamespace(name="Gen_1")
    acquitted = _result_of(test, "linalg", Outcome("compare"), [Explanation(["oracle: ..."], acquit=True, check="x")])
    assert acquitted.passed and (acquitted.check, acquitted.check_turned_away) == ("x", True)
    kept = _result_of(test, "linalg", Outcome("compare"), [Explanation(["oracle: ... acquits"], check="y")])
    assert not kept.passed and (kept.check, kept.check_turned_away) == ("y", False)
    moved = Explanation(stage="backend", error="lowering emits it", check="spec refusal")
    assert _result_of(test, "tosa", Outcome("execute"), [moved]).check_turned_away
    assert _result_of(test, "linalg", Outcome("compare"), [Explanation(["no check"])]).check is None


def test_a_reduction_gives_the_result_its_findings_as_fields():
    result = Result("Gen_1", "linalg", "fail", stage="backend")
    outcome = ReduceOutcome(
        Path("/b"), False, guilty_op=VIEW, failing_step=LINALG, types_broke="after p", types_root="r"
    )
    outcome.to_result(result)
    assert (result.bundle, result.repro_path) == ("/b", None)  # not re-verified: no reproducer
    assert (result.guilty_op, result.failing_step, result.types_broke, result.types_root) == (
        VIEW,
        LINALG,
        "after p",
        "r",
    )
    ReduceOutcome(Path("/b"), True).to_result(result)
    assert result.repro_path == "/b"
    assert ReduceOutcome.not_reduced("reducer: not run").bundle is None


def test_a_failure_reads_the_reducers_findings_from_fields_never_from_notes():
    noted = Result("Gen_1", "linalg", "fail", stage="backend", signature=Signature("backend", "p", "m"))
    noted.notes = ["reducer: types first disagree after p: x", "reducer: types root: a fold or rewrite of where"]
    assert Failure.of(noted).types_root is None and Failure.of(noted).types_broke is None
    fields = reduced("Gen_1", "linalg", "backend | p | m", VIEW, LINALG, types_broke="after p", types_bundle="b")
    failure = Failure.of(fields)
    assert (failure.guilty_op, failure.failing_step, failure.types_broke) == (VIEW, LINALG, "after p; b")
    unverified = Result("Gen_2", "linalg", "fail", stage="backend", signature=Signature("backend", "p", "m"))
    unverified.bundle, unverified.guilty_op = "/b", VIEW
    assert Failure.of(unverified).guilty_op is None  # an unverified bundle names nothing


def test_bugs_failing_in_one_lowering_of_one_op_are_one_root_at_any_config(tmp_path):
    """The `aten.view` lowering three times: a wrong result on linalg, a verifier error on eager
    (another message), a crash's bundle on linalg; `view` in another pass is another root; a
    bug whose types a fold broke has that fold as its root."""
    from e2e.fuzz.records import campaign_bugs

    fold = "a fold or rewrite of torch.aten.where.self"
    results = [
        reduced("Gen_1", "linalg", "compare | values", VIEW, LINALG),
        reduced("Gen_2", "eager", "backend | convert-torch-to-linalg | loc: 'tensor.expand_shape' op bad", VIEW, LINALG),
        reduced("Gen_3", "linalg", "lower | one-shot-bufferize | loc: 'tensor.cast' op x", VIEW, LINALG),
        reduced("Gen_4", "tosa", "backend | convert-torch-to-tosa | loc: 'tosa.reshape' op bad", VIEW, "convert-torch-to-tosa"),
        reduced("Gen_5", "torchscript", "compare | shape", "torch.aten.where.self", "canonicalize", types_root=fold),
    ]  # fmt: skip
    classified = classify(results, known_on(tmp_path, {"linalg": ""}), lambda failure: None)
    roots = {bug.first.test: bug.root for bug in classified.bugs}
    view_in_linalg = f"{VIEW} in convert-torch-to-linalg"
    assert roots == {
        "Gen_1": view_in_linalg,
        "Gen_2": view_in_linalg,
        "Gen_3": view_in_linalg,
        "Gen_4": f"{VIEW} in convert-torch-to-tosa",
        "Gen_5": fold,
    }
    records = {record.tests[0]: record.root for record in campaign_bugs(classified.bugs, tmp_path)}
    assert records == roots  # bugs.json's `root`, as the service reads it


def test_the_report_counts_roots_behind_bugs_and_gives_each_bug_its_root():
    from e2e.fuzz.report import markdown, roots

    def bug(test: str, config: str, step: str | None) -> Bug:
        signature = Signature("backend", "convert-torch-to-linalg", f"loc: '{test}' op bad")
        failure = Failure(test, config, COMPILE, signature, VIEW, f"/r/{test}", failing_step=step)
        return Bug(config, signature, VIEW, COMPILE, False, [failure])

    unrooted = Failure("Gen_9", "linalg", WRONG, Signature("compare", "values"), None)
    classified = Classified(
        [bug("Gen_1", "linalg", LINALG), bug("Gen_2", "eager", LINALG), Bug("linalg", unrooted.signature, None, WRONG, False, [unrooted])]
    )  # fmt: skip
    assert {root: [n for n, _ in bugs] for root, bugs in roots(classified).items()} == {
        f"{VIEW} in convert-torch-to-linalg": [1, 2]
    }
    text = markdown({}, [], classified, lambda bug: ("torch.aten.view", "torch.prim.ListConstruct"))
    assert "**1 roots behind 2 bugs** (1 more with no pass and guilty op known)" in text
    assert f"| {VIEW} in convert-torch-to-linalg | 1, 2 | eager, linalg |" in text
    assert f"| `{VIEW}` | {VIEW} in convert-torch-to-linalg | torch.aten.view, torch.prim.ListConstruct |" in text


def test_a_wrong_result_whose_reduction_moved_its_mismatch_is_known_by_its_op(tmp_path):
    """GenBug_4246493_stablehlo: torch-mlir's `remainder` lowering, known as a `nan` mismatch of
    a hand-written test, showed as `values` once the reducer dropped an op: known, not new.
    A wrong result in another op stays new, as does `remainder` on another config."""
    known = known_on(tmp_path, {"stablehlo": "Remainder_Float  # fail: compare | nan\n", "tosa": ""})
    results = [
        reduced("Gen_1", "stablehlo", "compare | values", "torch.aten.remainder.Tensor", "p"),
        reduced("Gen_2", "stablehlo", "compare | values", "torch.aten.cumsum", "p"),
        reduced("Gen_3", "tosa", "compare | values", "torch.aten.remainder.Tensor", "p"),
    ]
    found = classify(results, known, lambda failure: None)
    assert {bug.first.test: bug.known for bug in found.bugs} == {"Gen_1": True, "Gen_2": False, "Gen_3": False}


def test_a_compile_failure_in_a_known_lowering_of_its_op_is_known_whatever_its_message(tmp_path):
    """The same pass failing on the same op, another message (and another config taking the
    pass): known; the same op in another pass: new."""
    entry = "View_Dynamic  # fail: backend | convert-torch-to-linalg | loc: 'torch.aten.view' op failed to legalize\n"
    known = known_on(tmp_path, {"linalg": entry, "eager": ""})
    results = [
        reduced("Gen_1", "eager", "backend | convert-torch-to-linalg | loc: 'tensor.expand_shape' op bad", VIEW, LINALG),
        reduced("Gen_2", "linalg", "backend | convert-torch-to-tosa | loc: 'tosa.reshape' op bad", VIEW, "convert-torch-to-tosa"),
    ]  # fmt: skip
    found = classify(results, known, lambda failure: None)
    assert {bug.first.test: bug.known for bug in found.bugs} == {"Gen_1": True, "Gen_2": False}


def test_a_new_bug_is_known_by_its_root_once_its_regression_test_reduced_it(tmp_path):
    """Classified new (no bundle, no op: its wrong result named nothing); the regression test's
    pair, reduced, fails in `remainder`, which a hand-written entry carries."""
    from e2e.fuzz.triage import known_by_root

    known = known_on(tmp_path, {"stablehlo": "Remainder_Float  # fail: compare | nan\n"})
    first = Result("Gen_1", "stablehlo", "fail", stage="compare", signature=Signature("compare", "values"))
    [bug] = classify([first], known, lambda failure: None).bugs
    assert not bug.known
    bug.reduced_failure = Failure.of(
        reduced("GenBug_1_stablehlo", "stablehlo", "compare | values", "torch.aten.remainder.Tensor", "p")
    )
    assert known_by_root([bug], known, log=lambda line: None) == 1 and bug.known
    assert bug.root == "torch.aten.remainder.Tensor in p"  # the reduced pair's op and step


def test_the_ops_column_lists_the_reduced_bundles_ops_not_the_programs(tmp_path):
    from e2e.fuzz.triage import reduced_ops

    bundle = tmp_path / "repro" / "Gen_1" / "linalg"
    bundle.mkdir(parents=True)
    (bundle / "repro.py").write_text("")
    (bundle / "repro.mlir").write_text(
        "func.func @main(%arg0: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[12],f32> {\n"
        "  %int12 = torch.constant.int 12\n"
        "  %0 = torch.prim.ListConstruct %int12 : (!torch.int) -> !torch.list<int>\n"
        "  %1 = torch.aten.view %arg0, %0 : !torch.vtensor<[4,3],f32>, !torch.list<int> -> !torch.vtensor<[12],f32>\n"
        "  return %1 : !torch.vtensor<[12],f32>\n}\n"
    )
    signature = Signature("compare", "values")
    failure = Failure("Gen_1", "linalg", WRONG, signature, VIEW, str(bundle))
    bug = Bug("linalg", signature, VIEW, WRONG, False, [failure])
    assert reduced_ops(bug, tmp_path) == ("torch.aten.view", "torch.prim.ListConstruct")
    unreduced = Bug("linalg", signature, None, WRONG, False, [Failure("Gen_2", "linalg", WRONG, signature, None)])
    assert reduced_ops(unreduced, tmp_path) == ()  # not the original program's ops


def test_the_service_keeps_a_bugs_root_and_filters_by_it(tmp_path):
    """bugs.json's `root` lands in the bugs table; the list filters on it; a later run's
    root (a bug reduced further) replaces an earlier one."""
    import pytest

    from tests.extras import missing_extra

    if reason := missing_extra("service"):
        pytest.skip(reason)
    from e2e.fuzz.records import BUGS_FILE, BUGS_FORMAT, BugRecord
    from e2e.service import queries
    from e2e.service.reports import read_reports
    from e2e.service.store import Store

    def run(name: str, roots: dict[str, str | None]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        rows = [
            {"test": test, "config": "linalg", "outcome": "fail", "stage": "backend", "final": "failed",
             "signature": f"backend | p | loc: '{test}' op bad", "notes": []}
            for test in roots
        ]  # fmt: skip
        records = [
            BugRecord(
                "linalg", f"backend | p | {test}", VIEW, COMPILE, "backend", row["signature"], False, (test,), root
            )
            for (test, root), row in zip(roots.items(), rows)
        ]
        (folder / "results.json").write_text(json.dumps(rows))
        run = {"run_id": name, "status": "finished", "commit": name, "branch": "main", "jit_target": "x86-64-v2",
               "versions": {"torch": "2.13.0+cpu", "torch-mlir": "20261001"}, "configs": ["linalg"]}  # fmt: skip
        (folder / "run.json").write_text(json.dumps(run))
        (folder / BUGS_FILE).write_text(json.dumps({"format": BUGS_FORMAT, "bugs": [r.to_json() for r in records]}))
        return folder

    store = Store(str(tmp_path / "service.db"))
    try:
        root = f"{VIEW} in convert-torch-to-linalg"
        store.ingest(read_reports(run("r1", {"A": root, "B": root, "C": None})), None)
        assert sorted(b["key"] for b in queries.bugs(store, root=root)["bugs"]) == [
            "backend | p | A",
            "backend | p | B",
        ]
        store.ingest(read_reports(run("r2", {"C": "a fold or rewrite of torch.aten.where.self"})), None)
        [folded] = queries.bugs(store, root="a fold or rewrite of torch.aten.where.self")["bugs"]
        assert folded["key"] == "backend | p | C"
        one = queries.bugs(store, root=root)["bugs"][0]
        assert [b["key"] for b in queries.bug(store, one["id"])["root_bugs"]] != []
    finally:
        store.close()


def test_without_a_program_the_support_matrixs_data_answers_not_its_page(tmp_path):
    """`e2e.tools.support` writes the statuses beside the page; the triage reads them."""
    from e2e.fuzz.coverage import MATRIX, Support, read_matrix
    from e2e.tools.support import STATUSES_FORMAT

    data = tmp_path / "support.json"
    data.write_text(json.dumps({"format": STATUSES_FORMAT, "configs": ["tosa"], "ops": {"cumsum": {"tosa": "pass"}}}))
    support = Support(lambda test: None, matrix=read_matrix(data))
    signature = Signature("backend", "convert-torch-to-tosa", "loc: failed to legalize operation 'torch.aten.cumsum'")
    taken = Failure("Gen_1", "tosa", COMPILE, signature, "torch.aten.cumsum")
    refused = Failure("Gen_2", "tosa", COMPILE, Signature("backend", "p", "x"), "torch.aten.asin")
    assert support.untaken(taken) is None and support.untaken(refused) == "asin"
    assert MATRIX.suffix == ".json" and read_matrix(MATRIX)["cumsum"]["eager"] == "pass"  # the committed data


def test_a_written_bundle_names_its_failing_step_for_its_root(tmp_path):
    """`ReduceOutcome.failing_step`: the bundle's case's last pipeline entry (a pass that
    refuses `math.exp`, after the linalg lowering), the step a root names."""
    from compiler.pipelines import TORCH_BACKEND_TO_LINALG
    from e2e.reducer.failure import reduce_mlir
    from tests.test_reducer import BROKEN, torch_backend_ir

    pipeline = [*TORCH_BACKEND_TO_LINALG, BROKEN + "reject_exp"]
    outcome = reduce_mlir(
        torch_backend_ir(), pipeline, "backend", error_pattern="math.exp", test="T", config="c", reports_dir=tmp_path
    )
    assert outcome.verified and outcome.failing_step == pipeline[-1]
    result = Result("T", "c", "fail", stage="backend", signature=Signature("backend", pipeline[-1], "math.exp"))
    outcome.to_result(result)
    assert Bug("c", result.signature, "math.exp", COMPILE, False, [Failure.of(result)]).root == (
        "math.exp in python:tests.broken_compilers:reject_exp"
    )


def test_a_crash_with_its_crash_state_is_known_by_an_entry_recorded_without_one():
    from e2e.framework.signature import Signature
    from e2e.fuzz.bugs import CRASH, Failure, KnownSignatures

    generic = Signature.parse("crash | execute | Fatal Python error: Aborted")
    known = KnownSignatures({}, {"linalg": (("Cumsum_Dynamic", generic),)})
    observed = Signature.parse("crash | execute | Fatal Python error: Aborted: mismatched size for broadcast")
    failure = Failure("Gen_1", "linalg", CRASH, observed, "torch.aten.cumsum")
    assert known.carries(failure)
    # Another stage's entry, or another op's test, does not carry it.
    other = Failure(
        "Gen_1",
        "linalg",
        CRASH,
        Signature.parse("crash | backend | Fatal Python error: Aborted: x"),
        "torch.aten.cumsum",
    )
    assert not known.carries(other)
    assert not known.carries(Failure("Gen_1", "linalg", CRASH, observed, "torch.aten.view"))
