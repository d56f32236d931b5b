"""The reproducer service: its database on SQLite and on a real PostgreSQL server, ingest
(one run in whole, once), bugs across runs (new, known, fixed, reopened), flaky pairs, the
xfail export, a pull request's summary, and the server's refusals.

Runs here are reports directories in the suite's own format (`results.json`, `run.json`,
bundles), written by `write_run` with the outcomes each test needs; `test_service_e2e.py`
feeds the service real runs of the suite."""

from __future__ import annotations

import pytest

from tests.extras import missing_extra

if reason := missing_extra("service"):
    pytest.skip(reason, allow_module_level=True)

import io
import json
import tarfile
import threading
from pathlib import Path

import httpx

from e2e.service import queries
from e2e.service.reports import pack, read_reports
from e2e.service.store import Store
from tests.servers import Postgres, Service

TOKEN = "test-token"
VALUES = "compare | values"
LEGALIZE = "backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.atan2'"


@pytest.fixture(scope="module")
def postgres():
    server = Postgres().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> str:
    """A new empty database of each kind."""
    if request.param == "sqlite":
        return str(tmp_path / "service.db")
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def store(db):
    opened = Store(db)
    yield opened
    opened.close()


def row(test: str, config: str, outcome: str = "pass", signature: str | None = None, final: str | None = None, **more):
    stage = signature.split(" | ")[0] if signature else None
    final = final or {"pass": "passed", "skip": "skipped"}.get(outcome, "failed")
    return {"test": test, "config": config, "outcome": outcome, "stage": stage, "signature": signature,
            "final": final, "duration": 0.25, "notes": [], **more}  # fmt: skip


def write_run(folder: Path, rows: list[dict], run_id: str, commit: str = "c1", branch: str = "main", **meta) -> Path:
    """A reports directory holding `rows` and its run record."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(rows))
    run = {"run_id": run_id, "status": "finished", "commit": commit, "branch": branch, "jit_target": "x86-64-v2",
           "versions": {"torch": "2.13.0+cpu", "torch-mlir": "20261001"}, "configs": sorted({r["config"] for r in rows}),
           **meta}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def write_bundle(folder: Path, ops: int, verified: bool | None = True) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    body = "\n".join(
        f"  %{i} = torch.aten.tanh %arg0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>" for i in range(ops)
    )
    (folder / "repro.mlir").write_text(f"func.func @forward(%arg0: !torch.vtensor<[2],f32>) {{\n{body}\n}}\n")
    (folder / "README.md").write_text("# a bundle\n")
    (folder / "repro.py").write_text("raise SystemExit(1)\n")
    if verified is not None:
        (folder / "bundle.json").write_text(json.dumps({"verified": verified}))
    return str(folder)


def ingest(store: Store, folder: Path, label: str | None = None):
    return store.ingest(read_reports(folder), label)


def test_the_schema_is_made_by_the_migrations_and_matches_the_tables(store):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from e2e.service.schema import metadata

    assert store.revision() == "0002"
    with store.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert differences == []
    Store(store.url).close()  # opening again upgrades nothing and fails nothing


def test_an_older_database_is_upgraded_with_its_data(db):
    """A database made at revision 0001 (before jobs), holding a bug, upgraded by opening it."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from e2e.service.store import MIGRATIONS, database_url

    engine = create_engine(database_url(db))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(text(
            "INSERT INTO runs (id, key, kind, env_key, versions, configs, ingested_at, pairs, failing, counts) "
            "VALUES (1, 'k', 'suite', 'e', '{}', '[]', 0, 0, 0, '{}')"
        ))  # fmt: skip
        connection.execute(text(
            "INSERT INTO bugs (id, ident, config, key, guilty_op, kind, stage, signature, status, first_run_id, "
            "last_run_id, first_seen, last_seen, hits) VALUES (1, 'i', 'tosa', 'k', '', 'crash or hang', 'lower', "
            "'s', 'new', 1, 1, 0, 0, 1)"
        ))  # fmt: skip
    engine.dispose()
    upgraded = Store(db)
    assert upgraded.revision() == "0002"
    bug = queries.bug(upgraded, 1)
    assert (bug["config"], bug["status"], bug["runs_total"]) == ("tosa", "new", 0)
    upgraded.close()


def test_the_service_imports_neither_torch_nor_mlir():
    """The server parses no IR and runs no program: it starts without the compiler's imports."""
    import subprocess
    import sys

    code = "import sys, e2e.service.app, e2e.service.jobs; print(sorted({'torch', 'torch_mlir'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_run_is_ingested_once(store, tmp_path):
    folder = write_run(tmp_path / "r", [row("A", "linalg"), row("B", "linalg", "fail", VALUES)], "run1")
    first = ingest(store, folder)
    again = ingest(store, folder)
    assert first.created and not again.created and again.run_id == first.run_id
    assert queries.runs(store)["total"] == 1
    assert queries.bugs(store)["total"] == 1
    assert [h["outcome"] for h in queries.pair_history(store, "B", "linalg")["history"]] == ["fail"]


def test_a_bug_lives_across_runs_fixed_then_reopened_not_duplicated(store, tmp_path):
    failing = [row("A", "tosa", "fail", LEGALIZE), row("B", "tosa")]
    one = ingest(store, write_run(tmp_path / "1", failing, "r1"))
    two = ingest(store, write_run(tmp_path / "2", [row("A", "tosa"), row("B", "tosa")], "r2", commit="c2"))
    [bug] = queries.bugs(store)["bugs"]
    assert bug["status"] == "fixed" and two.fixed == [bug["id"]]
    assert (bug["last_failed_run_id"], bug["fixed_run_id"]) == (one.run_id, two.run_id)
    three = ingest(store, write_run(tmp_path / "3", failing, "r3", commit="c3"))
    assert three.reopened == [bug["id"]] and three.new_bugs == []
    again = queries.bug(store, bug["id"])
    assert again["status"] == "new" and again["fixed_run_id"] is None and again["runs_total"] == 2
    assert [e["kind"] for e in again["events"]] == ["opened", "fixed", "reopened"]


def test_a_bug_hidden_behind_another_failure_stays_open(store, tmp_path):
    ingest(store, write_run(tmp_path / "1", [row("A", "tosa", "fail", LEGALIZE)], "r1"))
    later = ingest(store, write_run(tmp_path / "2", [row("A", "tosa", "crash", "crash | execute | Fatal Python error: Aborted")], "r2"))  # fmt: skip
    assert later.fixed == [] and len(later.new_bugs) == 1
    assert {b["status"] for b in queries.bugs(store)["bugs"]} == {"new"}


def test_a_bug_not_rerun_stays_open(store, tmp_path):
    ingest(store, write_run(tmp_path / "1", [row("A", "tosa", "fail", LEGALIZE)], "r1"))
    other = ingest(store, write_run(tmp_path / "2", [row("C", "tosa"), row("A", "linalg")], "r2"))
    assert other.fixed == [] and queries.bugs(store)["bugs"][0]["status"] == "new"


def test_known_when_an_xfail_entry_carries_it_and_exported_as_an_xfail_set(store, tmp_path):
    rows = [row("A", "tosa", "fail", LEGALIZE, final="xfailed"), row("B", "tosa", "fail", VALUES)]
    ingest(store, write_run(tmp_path / "1", rows, "r1"))
    statuses = {b["key"]: b["status"] for b in queries.bugs(store)["bugs"]}
    assert statuses == {"backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.atan2'": "known",
                        "compare | values": "new"}  # fmt: skip
    assert queries.export_xfails(store, "tosa") == f"A  # fail: {LEGALIZE}\nB  # fail: {VALUES}\n"


def test_new_since_a_run_and_newly_failing_pairs(store, tmp_path):
    base = ingest(store, write_run(tmp_path / "1", [row("A", "linalg"), row("B", "linalg")], "r1"))
    new = ingest(store, write_run(tmp_path / "2", [row("A", "linalg", "crash", "crash | execute | Fatal Python error: Aborted"), row("B", "linalg")], "r2", commit="c2"))  # fmt: skip
    assert [b["id"] for b in queries.bugs(store, since_run=base.run_id)["bugs"]] == new.new_bugs
    assert queries.bugs(store, since_run=new.run_id)["total"] == 0
    changes = queries.diff(store, base.run_id, new.run_id)
    assert changes["counts"] == {"newly failing": 1}
    assert changes["changes"]["newly failing"][0]["test"] == "A"


def test_a_pair_that_differs_on_one_build_is_flaky(store, tmp_path):
    ingest(store, write_run(tmp_path / "1", [row("A", "eager"), row("B", "eager")], "r1"))
    ingest(store, write_run(tmp_path / "2", [row("A", "eager", "fail", VALUES), row("B", "eager")], "r2"))
    ingest(store, write_run(tmp_path / "3", [row("A", "eager", "fail", VALUES), row("B", "eager", "fail", VALUES)], "r3", commit="c9"))  # fmt: skip
    [flaky] = queries.flaky(store)
    assert (flaky["test"], flaky["config"]) == ("A", "eager")  # B failed on another commit only
    assert sorted(flaky["outcomes"]) == ["fail", "pass"]
    assert queries.export_xfails(store, "eager").startswith("A  # flaky:")


def test_the_smallest_verified_bundle_is_kept(store, tmp_path):
    def run(name: str, ops: int, verified: bool | None):
        bundle = write_bundle(tmp_path / name / "repro" / "A" / "linalg", ops, verified)
        return write_run(tmp_path / name, [row("A", "linalg", "fail", VALUES, repro_path=bundle)], name, commit=name)

    ingest(store, run("1", 9, False))
    ingest(store, run("2", 12, True))
    ingest(store, run("3", 20, True))
    ingest(store, run("4", 5, True))
    bug = queries.bug(store, queries.bugs(store)["bugs"][0]["id"])
    assert bug["bundle"]["verified"] is True and bug["bundle"]["repro_mlir"].count("torch.aten.tanh") == 5
    name, data = queries.bundle_archive(store, bug["id"])
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        assert sorted(archive.getnames()) == ["A.linalg/README.md", "A.linalg/bundle.json", "A.linalg/repro.mlir", "A.linalg/repro.py"]  # fmt: skip


def test_a_pull_requests_failures_sorted_as_new_broken_or_flaky(store, tmp_path):
    from e2e.service.issue import summary

    main_rows = [row("A", "tosa", "fail", LEGALIZE), row("B", "tosa"), row("C", "tosa")]
    ingest(store, write_run(tmp_path / "m1", main_rows, "m1", commit="m"))
    ingest(store, write_run(tmp_path / "m2", [*main_rows[:2], row("C", "tosa", "fail", VALUES)], "m2", commit="m"))
    pr_rows = [row("A", "tosa", "fail", LEGALIZE), row("B", "tosa", "fail", VALUES), row("C", "tosa", "fail", VALUES)]
    pr = ingest(store, write_run(tmp_path / "pr", pr_rows, "pr", commit="p", branch="feature"))
    text = summary(store, pr.run_id, "main")
    assert "| new | 1 |" in text and "| broken on the base branch | 1 |" in text and "| flaky | 1 |" in text
    new_part = text.split("### new")[1].split("###")[0]
    assert "`B` on `tosa`" in new_part


def test_status_changes_need_a_reason_and_a_real_bug(store, tmp_path):
    ingest(
        store, write_run(tmp_path / "1", [row("A", "tosa", "fail", LEGALIZE), row("B", "tosa", "fail", VALUES)], "r1")
    )
    first, second = sorted(b["id"] for b in queries.bugs(store)["bugs"])
    store.set_status(second, "duplicate", "the same lowering", "tester", duplicate_of=first)
    assert queries.bug(store, second)["duplicate_of"] == first
    with pytest.raises(KeyError):
        store.set_status(999, "invalid", "no such bug", "tester")
    with pytest.raises(ValueError):
        store.set_status(first, "duplicate", "of nothing", "tester")


# The server: uploads in, refusals out, the database untouched by a refusal.


@pytest.fixture
def service(db, tmp_path):
    server = Service(db, TOKEN, tmp_path / "service.log")
    yield server
    server.stop()


def counts(url: str) -> tuple[int, int]:
    return httpx.get(f"{url}/api/runs").json()["total"], httpx.get(f"{url}/api/bugs").json()["total"]


def post(url: str, data: bytes, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/api/runs", content=data, headers=headers, timeout=120)


def archive(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, data: bytes = b"{}", kind: bytes = tarfile.REGTYPE, target: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, target, len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


def test_bad_uploads_are_refused_and_change_nothing(service, tmp_path):
    good = pack(read_reports(write_run(tmp_path / "good", [row("A", "linalg", "fail", VALUES)], "good")))
    assert post(service.url, good).status_code == 201
    before = counts(service.url)
    results = json.dumps([row("B", "linalg", "fail", VALUES)]).encode()
    bad = {
        "not a reports directory": archive([member("notes.txt", b"hello")]),
        "bad JSON": archive([member("results.json", b"[{"), member("run.json", b"{}")]),
        "a truncated archive": good[: len(good) // 2],
        "a member outside its folder": archive([member("../results.json", results)]),
        "an absolute member": archive([member("/tmp/results.json", results)]),
        "a symbolic link": archive([member("results.json", kind=tarfile.SYMTYPE, target="/etc/passwd")]),
        "a hard link": archive([member("run.json", b"{}"), member("results.json", kind=tarfile.LNKTYPE, target="run.json")]),
        "rows that are not results": archive([member("results.json", b'[{"x": 1}]')]),
        "an outcome no pair has": archive([member("results.json", b'[{"test": "A", "config": "linalg", "outcome": "exploded"}]')]),
    }  # fmt: skip
    for what, data in bad.items():
        answer = post(service.url, data)
        assert 400 <= answer.status_code < 500, f"{what}: {answer.status_code} {answer.text}"
        assert answer.json()["detail"], what
        assert counts(service.url) == before, f"{what} changed the database"
    assert post(service.url, good, token=None).status_code == 401
    assert post(service.url, good, token="wrong").status_code == 401


def test_an_upload_past_the_size_limit_is_refused(db, tmp_path):
    import os

    folder = write_run(tmp_path / "big", [row("A", "linalg", "fail", VALUES, repro_path=str(tmp_path / "big" / "repro" / "A"))], "big")  # fmt: skip
    write_bundle(folder / "repro" / "A", 1)
    (folder / "repro" / "A" / "weights.bin").write_bytes(os.urandom(2 * 2**20))  # incompressible
    server = Service(db, TOKEN, tmp_path / "service.log", "--max-upload-mib", "1")
    try:
        answer = post(server.url, pack(read_reports(folder)))
        assert answer.status_code == 413, answer.text
        assert counts(server.url) == (0, 0)
    finally:
        server.stop()


def test_eight_concurrent_uploads_all_land(service, tmp_path):
    uploads = []
    for shard in range(8):
        rows = [row(f"T{shard}_{i}", "linalg", "fail" if i % 7 == 0 else "pass", VALUES if i % 7 == 0 else None) for i in range(300)]  # fmt: skip
        uploads.append(pack(read_reports(write_run(tmp_path / f"s{shard}", rows, f"shard{shard}"))))
    answers: list[httpx.Response] = []
    threads = [threading.Thread(target=lambda d=data: answers.append(post(service.url, d))) for data in uploads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.status_code for a in answers) == [201] * 8, [a.text for a in answers if a.status_code != 201]
    assert counts(service.url) == (8, 1)  # one bug key on one config: one bug, hit by every shard
    assert httpx.get(f"{service.url}/api/bugs").json()["bugs"][0]["hits"] == 8 * 43


def test_status_change_through_the_api_needs_the_token(service, tmp_path):
    assert post(service.url, pack(read_reports(write_run(tmp_path / "r", [row("A", "linalg", "fail", VALUES)], "r")))).status_code == 201  # fmt: skip
    bug_id = httpx.get(f"{service.url}/api/bugs").json()["bugs"][0]["id"]
    change = {"status": "invalid", "reason": "undefined behaviour in the test"}
    assert httpx.post(f"{service.url}/api/bugs/{bug_id}/status", json=change).status_code == 401
    refused = httpx.post(f"{service.url}/api/bugs/{bug_id}/status", json={"status": "invalid"}, headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    assert refused.status_code == 400
    done = httpx.post(
        f"{service.url}/api/bugs/{bug_id}/status", json=change, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert done.status_code == 200 and done.json()["status"] == "invalid"
    assert httpx.get(f"{service.url}/bugs/{bug_id}").text.count("undefined behaviour in the test") >= 1


def test_a_retest_fixes_a_bug_whose_bundle_stopped_reproducing_and_reopens_one_that_did_not(store, tmp_path):
    from e2e.service.tasks import retest

    def run(name: str, test: str, exit_status: int):
        bundle = write_bundle(tmp_path / name / "repro" / test / "linalg", 2)
        shows = "print('REPRODUCED: compare | values')\n" if exit_status == 1 else ""  # what a real repro.py prints
        (Path(bundle) / "repro.py").write_text(f"{shows}raise SystemExit({exit_status})\n")
        return write_run(tmp_path / name, [row(test, "linalg", "fail", VALUES if test == "A" else LEGALIZE, repro_path=bundle)], name)  # fmt: skip

    ingest(store, run("1", "A", 0))  # its bug is gone on these versions
    ingest(store, run("2", "B", 1))  # this one is not
    bundles = [
        {"bug": b["id"], "status": b["status"], "archive": queries.bundle_archive(store, b["id"])[1]}
        for b in queries.bugs(store)["bugs"]
    ]
    outcome = retest({"bundles": bundles})
    assert {(v["exit"], v["outcome"]) for v in outcome["verdicts"]} == {(0, "passes"), (1, "fails")}
    assert outcome["versions"]["torch"].startswith("2.13.0")
    fixed, reopened = store.retested(outcome["verdicts"], outcome["versions"], job_id=None)
    by_key = {b["key"]: b for b in queries.bugs(store)["bugs"]}
    assert fixed == [by_key[VALUES]["id"]] and reopened == []
    assert by_key[VALUES]["status"] == "fixed" and by_key[VALUES]["retest"]["outcome"] == "passes"
    again = [{**v, "exit": 1, "outcome": "fails"} for v in outcome["verdicts"]]
    assert store.retested(again, outcome["versions"])[1] == [by_key[VALUES]["id"]]
    assert queries.bug(store, by_key[VALUES]["id"])["status"] == "new"
