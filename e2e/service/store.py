"""The bug database: one `Store` over SQLite (the default) or PostgreSQL, its schema made
and upgraded by Alembic, and ingest: a run in whole or not at all.

Ingest, in one transaction, serialized (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's advisory
lock: a bug's identity and whether it was fixed or reopened depend on the order of runs):

1. a run already there (its `RunReport.key`) changes nothing;
2. the run, its pairs and signatures, and each pair's result;
3. each bug of the run: made the first time it is seen, else its last run, hits and root
   (`BugRecord.root`: the latest run's) moved on; a fixed bug seen again reopened; a new bug an xfail entry carries made known;
   its bundle kept when it is verified where the kept one is not, or smaller;
4. fixed: an open bug of a config the run ran, not hit by it, whose pairs that hit it the
   last time it was seen ran again and none hit it (with the run it last failed and first
   passed in);
5. flaky: a pair whose outcome differs from an earlier run's on the same commit and versions.

The pages and the API read through `e2e.service.queries`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from sqlalchemy import Engine, bindparam, create_engine, event, insert, select, text, update
from sqlalchemy.engine import Connection

from e2e.service import schema as t
from e2e.service.releases import FAILS, PASSES
from e2e.service.reports import RunReport, bundle_archive, bundle_folder

MIGRATIONS = Path(__file__).with_name("migrations")
OPEN = ("new", "known")  # a bug's statuses while it still reproduces
STATUSES = ("new", "known", "fixed", "invalid", "duplicate")
# Outcomes that are not a verdict on the pair (the config could not honour the test).
NO_VERDICT = ("skip",)
CHUNK = 500  # parameters per IN (...) query


def database_url(db: str) -> str:
    """`--db`: a URL (`postgresql://user@host/e2e`, `sqlite:///x.db`) or a SQLite file's path."""
    if "://" in db:
        return db.replace("postgresql://", "postgresql+psycopg://", 1) if db.startswith("postgresql://") else db
    Path(db).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(db).expanduser().resolve()}"


@dataclass
class Ingested:
    """What one ingest did."""

    run_id: int
    created: bool  # False: the run was already there
    pairs: int = 0
    new_bugs: list[int] = field(default_factory=list)  # first seen in this run
    known_new_bugs: int = 0  # of those, how many an xfail entry (or the campaign's triage) knew
    seen_bugs: list[int] = field(default_factory=list)  # bugs known before, hit again
    reopened: list[int] = field(default_factory=list)
    fixed: list[int] = field(default_factory=list)
    flaky: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return self.__dict__.copy()


class Store:
    """The database at `url`, migrated to the newest schema when opened."""

    def __init__(self, db: str):
        self.url = database_url(db)
        self.sqlite = self.url.startswith("sqlite")
        self.engine = self._engine(immediate=False)
        # SQLite: writers take the write lock when they begin, so that two never deadlock
        # upgrading a read lock; readers begin as usual and read beside them (WAL).
        self.write_engine = self._engine(immediate=True) if self.sqlite else self.engine
        self._lock = threading.Lock()
        self.migrate()

    def _engine(self, immediate: bool) -> Engine:
        if not self.sqlite:
            return create_engine(self.url, pool_pre_ping=True)
        engine = create_engine(self.url, connect_args={"check_same_thread": False, "timeout": 120})

        @event.listens_for(engine, "connect")
        def connect(dbapi_connection, _record):
            dbapi_connection.isolation_level = None  # the begin below is ours
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=120000"):
                dbapi_connection.execute(f"PRAGMA {pragma}")

        @event.listens_for(engine, "begin")
        def begin(connection):
            connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine

    def migrate(self) -> None:
        """Make or upgrade the schema to the newest migration (Alembic's `upgrade head`)."""
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.write_engine.begin() as connection:
            if not self.sqlite:
                connection.execute(text("SELECT pg_advisory_xact_lock(7343)"))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def close(self) -> None:
        self.engine.dispose()
        self.write_engine.dispose()

    # Ingest.

    def ingest(self, report: RunReport, label: str | None = None, job_id: int | None = None) -> Ingested:
        """Record `report` (see the module doc); a run already recorded changes nothing. The
        result of job `job_id`: recorded on the job in the same transaction (done, its run),
        and never twice for one job."""
        start = time.monotonic()
        with self._lock, self.write_engine.begin() as connection:
            if not self.sqlite:
                connection.execute(text("SELECT pg_advisory_xact_lock(7344)"))
            if job_id is not None:
                taken = connection.execute(select(t.jobs.c.run_id).where(t.jobs.c.id == job_id)).scalar()
                if taken is not None:
                    return Ingested(taken, False)
            found = connection.execute(select(t.runs.c.id).where(t.runs.c.key == report.key)).scalar()
            if found is not None:
                return Ingested(found, False)
            done = _Ingest(connection, report, label).run()
            if job_id is not None:
                connection.execute(
                    update(t.jobs)
                    .where(t.jobs.c.id == job_id)
                    .values(run_id=done.run_id, state="done", finished_at=time.time())
                )
        done.seconds = round(time.monotonic() - start, 3)
        return done

    def set_status(self, bug_id: int, status: str, reason: str, actor: str, duplicate_of: int | None = None) -> None:
        """A maintainer's word on a bug: invalid or duplicate (of another bug), or back to open."""
        if status not in STATUSES:
            raise ValueError(f"status {status!r}: one of {', '.join(STATUSES)}")
        if status == "duplicate" and duplicate_of is None:
            raise ValueError("a duplicate names the bug it duplicates (duplicate_of)")
        with self._lock, self.write_engine.begin() as connection:
            ids = {bug_id} | ({duplicate_of} if duplicate_of is not None else set())
            found = set(connection.execute(select(t.bugs.c.id).where(t.bugs.c.id.in_(ids))).scalars())
            if found != ids:
                raise KeyError(f"no bug {', '.join(str(i) for i in sorted(ids - found))}")
            connection.execute(
                update(t.bugs)
                .where(t.bugs.c.id == bug_id)
                .values(
                    status=status, status_reason=reason, duplicate_of=duplicate_of if status == "duplicate" else None
                )
            )
            _event(connection, bug_id, None, "status", status, reason, actor)

    def set_release_range(self, bug_id: int, found: dict, job_id: int | None = None, worker: str | None = None) -> None:
        """A release-range job's result (`e2e.service.releases.ReleaseRange` as JSON), kept on
        the bug; the job marked done in the same transaction."""
        with self._lock, self.write_engine.begin() as connection:
            connection.execute(update(t.bugs).where(t.bugs.c.id == bug_id).values(release_range=json.dumps(found)))
            status = connection.execute(select(t.bugs.c.status).where(t.bugs.c.id == bug_id)).scalar()
            _event(connection, bug_id, None, "range", status, found.get("summary", ""), f"release-range job {job_id}")
            summary = {"summary": found.get("summary"), "markdown": found.get("markdown")}
            _job_done(connection, job_id, summary, worker)

    def retested(
        self, verdicts: list[dict], versions: dict, job_id: int | None = None, worker: str | None = None
    ) -> tuple[list[int], list[int]]:
        """A retest's verdicts (`e2e.service.tasks.retest`): an open bug whose bundle passes is
        fixed on `versions`; a fixed one whose bundle fails is reopened; the job marked
        done in the same transaction (a service killed in between retests again, never half).
        (fixed, reopened)."""
        fixed, reopened = [], []
        now = time.time()
        with self._lock, self.write_engine.begin() as connection:
            for verdict in verdicts:
                bug_id, outcome = verdict["bug"], verdict["outcome"]
                record = {"outcome": outcome, "exit": verdict["exit"], "versions": versions, "at": now, "job": job_id}
                current = connection.execute(select(t.bugs.c.status).where(t.bugs.c.id == bug_id)).scalar()
                values: dict = {"retest": json.dumps(record)}
                if outcome == PASSES and current in OPEN:
                    values["status"] = "fixed"
                    reason = "its bundle no longer reproduces on " + ", ".join(
                        f"{k} {v}" for k, v in sorted(versions.items())
                    )
                    _event(connection, bug_id, None, "fixed", "fixed", reason, f"retest job {job_id}")
                    fixed.append(bug_id)
                elif outcome == FAILS and current == "fixed":
                    values["status"] = "new"
                    _event(
                        connection,
                        bug_id,
                        None,
                        "reopened",
                        "new",
                        "its bundle reproduces again",
                        f"retest job {job_id}",
                    )
                    reopened.append(bug_id)
                connection.execute(update(t.bugs).where(t.bugs.c.id == bug_id).values(**values))
            summary = {"verdicts": verdicts, "versions": versions, "fixed": fixed, "reopened": reopened}
            _job_done(connection, job_id, summary, worker)
        return fixed, reopened


def _job_done(connection: Connection, job_id: int | None, result: dict, worker: str | None) -> None:
    if job_id is not None:
        connection.execute(
            update(t.jobs)
            .where(t.jobs.c.id == job_id)
            .values(state="done", result=json.dumps(result), worker=worker, finished_at=time.time())
        )


def _event(connection: Connection, bug_id: int, run_id: int | None, kind: str, status: str, reason: str, actor: str):
    connection.execute(
        insert(t.events).values(
            bug_id=bug_id, run_id=run_id, at=time.time(), kind=kind, status=status, reason=reason, actor=actor
        )
    )


def versions_of(run: dict) -> dict[str, str]:
    """A run's component versions: `run.json`'s `versions`, or for a run recorded before it
    had them, torch's and torch-mlir's as its `torch` and `torch_mlir` fields give them."""
    if isinstance(run.get("versions"), dict):
        return {str(k): str(v) for k, v in run["versions"].items()}
    found = {}
    for field_name, name in (("torch", "torch"), ("torch_mlir", "torch-mlir")):
        if run.get(field_name):
            found[name] = str(run[field_name]).split(" (")[0]
    return found


def env_key(run: dict) -> str:
    """What makes two runs the same build: commit, versions and JIT target."""
    basis = {"commit": run.get("commit"), "versions": versions_of(run), "jit_target": run.get("jit_target")}
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:32]


def final_of(row: dict) -> str:
    """A row's outcome after xfail sets (`final`), or its outcome for rows recorded without."""
    return row.get("final") or {"pass": "passed", "skip": "skipped"}.get(row.get("outcome"), "failed")


def _chunks(items: list, size: int = CHUNK) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _Ingest:
    """One run's ingest, inside its transaction."""

    def __init__(self, connection: Connection, report: RunReport, label: str | None):
        self.c = connection
        self.report = report
        self.label = label
        self.now = time.time()
        self.env_key = env_key(report.run)
        self.done: Ingested | None = None

    def run(self) -> Ingested:
        report, run = self.report, self.report.run
        counts: dict[str, Counter] = defaultdict(Counter)
        for row in report.rows:
            counts[row["config"]][final_of(row)] += 1
        configs = sorted(counts)
        failing = sum(1 for row in report.rows if row.get("outcome") not in ("pass", "skip"))
        self.run_id = self.c.execute(
            insert(t.runs).values(
                key=report.key,
                run_id=str(run.get("run_id") or "") or None,
                label=self.label,
                kind=report.kind,
                branch=run.get("branch"),
                commit=run.get("commit"),
                env_key=self.env_key,
                versions=json.dumps(versions_of(run), sort_keys=True),
                jit_target=run.get("jit_target"),
                machine=run.get("machine") or run.get("cpu"),
                configs=json.dumps(configs),
                command=run.get("command"),
                started_at=run.get("started_at"),
                ingested_at=self.now,
                pairs=len(report.rows),
                failing=failing,
                counts=json.dumps({config: dict(counter) for config, counter in counts.items()}, sort_keys=True),
            )
        ).inserted_primary_key[0]
        self.done = Ingested(self.run_id, True, pairs=len(report.rows))
        pair_ids = self._pair_ids([(row["test"], row["config"]) for row in report.rows])
        signature_ids = self._signature_ids([row["signature"] for row in report.rows if row.get("signature")])
        bug_ids = self._bugs(pair_ids)
        self.c.execute(
            insert(t.results),
            [
                {
                    "run_id": self.run_id,
                    "pair_id": pair_ids[(row["test"], row["config"])],
                    "outcome": row["outcome"],
                    "expected": final_of(row) in ("xfailed", "xpassed"),
                    "signature_id": signature_ids.get(row.get("signature")),
                    "bug_id": bug_ids.get(report.bug_of.get((row["test"], row["config"]))),
                    "duration_ms": int(round(float(row.get("duration") or 0.0) * 1000)),
                }
                for row in report.rows
            ],
        )
        self._fixed(configs, pair_ids, bug_ids)
        self._flaky(pair_ids)
        return self.done

    def _pair_ids(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Ids of (test, config) pairs, those never seen made."""
        found = self._select_pairs(keys)
        missing = [
            {"test": test, "config": config} for test, config in dict.fromkeys(keys) if (test, config) not in found
        ]
        if missing:
            self.c.execute(insert(t.pairs), missing)
            found |= self._select_pairs([(m["test"], m["config"]) for m in missing])
        return found

    def _select_pairs(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        by_config: dict[str, list[str]] = defaultdict(list)
        for test, config in keys:
            by_config[config].append(test)
        found = {}
        for config, tests in by_config.items():
            for chunk in _chunks(tests):
                query = select(t.pairs.c.id, t.pairs.c.test).where(
                    t.pairs.c.config == config, t.pairs.c.test.in_(chunk)
                )
                found |= {(test, config): pair_id for pair_id, test in self.c.execute(query)}
        return found

    def _signature_ids(self, texts: list[str]) -> dict[str, int]:
        digests = {text: hashlib.sha1(text.encode()).hexdigest() for text in dict.fromkeys(texts)}
        by_digest = {digest: text for text, digest in digests.items()}
        found = {}
        for chunk in _chunks(list(by_digest)):
            query = select(t.signatures.c.id, t.signatures.c.digest).where(t.signatures.c.digest.in_(chunk))
            found |= {by_digest[digest]: sid for sid, digest in self.c.execute(query)}
        missing = [{"digest": d, "text": text} for text, d in digests.items() if text not in found]
        if missing:
            self.c.execute(insert(t.signatures), missing)
            return self._signature_ids(texts)
        return found

    def _bugs(self, pair_ids: dict[tuple[str, str], int]) -> dict[str, int]:
        """Each bug of the run made or moved on; ident -> bug id. The bugs seen before are
        read, and moved on, in a few statements: a run of 10,000 pairs hits hundreds."""
        records = self.report.bugs
        known_rows = {}
        for chunk in _chunks([r.ident for r in records]):
            query = select(t.bugs.c.id, t.bugs.c.ident, t.bugs.c.status, t.bugs.c.root).where(t.bugs.c.ident.in_(chunk))
            known_rows |= {row.ident: row for row in self.c.execute(query)}
        ids, moved_on = {}, []
        for record in records:
            row = known_rows.get(record.ident)
            status = "known" if record.known else "new"
            if row is None:
                ids[record.ident] = self._open(record, status)
                continue
            ids[record.ident] = row.id
            moved_on.append({"b_id": row.id, "b_hits": len(record.tests)})
            # The latest run's root: a later run may have reduced the bug further (`BugRecord.root`).
            values: dict = {"root": record.root} if record.root and record.root != row.root else {}
            if row.status == "fixed":
                values |= {"status": status, "fixed_run_id": None, "last_failed_run_id": None}
                reason = f"fails again in {record.tests[0]}"
                _event(self.c, row.id, self.run_id, "reopened", status, reason, "ingest")
                self.done.reopened.append(row.id)
            elif row.status == "new" and record.known:
                values |= {"status": "known"}
                _event(self.c, row.id, self.run_id, "known", "known", "an xfail entry carries it", "ingest")
            if values:
                self.c.execute(update(t.bugs).where(t.bugs.c.id == row.id).values(**values))
            self.done.seen_bugs.append(row.id)
        if moved_on:
            self.c.execute(
                update(t.bugs)
                .where(t.bugs.c.id == bindparam("b_id"))
                .values(last_run_id=self.run_id, last_seen=self.now, hits=t.bugs.c.hits + bindparam("b_hits")),
                moved_on,
            )
        if records:
            self.c.execute(
                insert(t.bug_runs),
                [{"bug_id": ids[r.ident], "run_id": self.run_id, "pairs": len(r.tests)} for r in records],
            )
        for record in records:
            self._keep_bundle(ids[record.ident], record)
        return ids

    def _open(self, record, status: str) -> int:
        """A bug seen for the first time."""
        bug_id = self.c.execute(
            insert(t.bugs).values(
                ident=record.ident,
                config=record.config,
                key=record.key,
                guilty_op=record.guilty_op,
                kind=record.kind,
                stage=record.stage,
                signature=record.signature,
                root=record.root,
                status=status,
                first_run_id=self.run_id,
                last_run_id=self.run_id,
                first_seen=self.now,
                last_seen=self.now,
                hits=len(record.tests),
            )
        ).inserted_primary_key[0]
        _event(self.c, bug_id, self.run_id, "opened", status, f"first seen in {record.tests[0]}", "ingest")
        self.done.new_bugs.append(bug_id)
        self.done.known_new_bugs += record.known
        return bug_id

    def _keep_bundle(self, bug_id: int, record) -> None:
        """Offer the run's bundle of the bug; keep it when it is better than the kept one."""
        folder = self.report.bundle_dir(record)
        if folder is None:
            return
        repro = (folder / "repro.mlir").read_text(errors="replace")
        size = len(repro.encode())
        kept = self.c.execute(
            select(t.bundles.c.size, t.bundles.c.verified)
            .select_from(t.bugs.join(t.bundles, t.bugs.c.bundle_id == t.bundles.c.id))
            .where(t.bugs.c.id == bug_id)
        ).first()
        better = kept is None or (record.verified is True, -size) > (kept.verified is True, -kept.size)
        if not better:
            return
        data = bundle_archive(folder, bundle_folder(record.tests[0], record.config))
        digest = hashlib.sha256(data).hexdigest()
        if self.c.execute(select(t.blobs.c.sha256).where(t.blobs.c.sha256 == digest)).first() is None:
            self.c.execute(insert(t.blobs).values(sha256=digest, size=len(data), data=data))
        readme = folder / "README.md"
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        bundle_id = self.c.execute(
            insert(t.bundles).values(
                bug_id=bug_id,
                run_id=self.run_id,
                test=record.tests[0],
                config=record.config,
                blob=digest,
                size=size,
                verified=record.verified,
                repro_mlir=repro,
                readme=readme.read_text(errors="replace") if readme.is_file() else "",
                files=json.dumps(files),
            )
        ).inserted_primary_key[0]
        self.c.execute(update(t.bugs).where(t.bugs.c.id == bug_id).values(bundle_id=bundle_id))

    def _fixed(self, configs: list[str], pair_ids: dict, bug_ids: dict[str, int]) -> None:
        """Open bugs of the run's configs that it did not hit, whose last pairs ran again and
        passed, every one of them that ran: fixed in this run. A pair that now fails another
        way may hide the bug behind the new failure: the bug stays open."""
        hit = set(bug_ids.values())
        ran, passed = set(), set()
        for row in self.report.rows:
            if row.get("outcome") not in NO_VERDICT:
                ran.add(pair_ids[(row["test"], row["config"])])
                if row.get("outcome") == "pass":
                    passed.add(pair_ids[(row["test"], row["config"])])
        last_pairs = (
            select(t.results.c.bug_id, t.results.c.pair_id, t.bugs.c.last_run_id)
            .select_from(
                t.bugs.join(
                    t.results,
                    (t.results.c.run_id == t.bugs.c.last_run_id) & (t.results.c.bug_id == t.bugs.c.id),
                )
            )
            .where(t.bugs.c.status.in_(OPEN), t.bugs.c.config.in_(configs), t.bugs.c.last_run_id != self.run_id)
        )
        pairs_of: dict[int, set[int]] = defaultdict(set)
        last_run: dict[int, int] = {}
        for bug_id, pair_id, last in self.c.execute(last_pairs):
            pairs_of[bug_id].add(pair_id)
            last_run[bug_id] = last
        for bug_id, pairs in pairs_of.items():
            if bug_id in hit or not pairs & ran or not pairs & ran <= passed:
                continue
            self.c.execute(
                update(t.bugs)
                .where(t.bugs.c.id == bug_id)
                .values(status="fixed", fixed_run_id=self.run_id, last_failed_run_id=last_run[bug_id])
            )
            _event(self.c, bug_id, self.run_id, "fixed", "fixed", f"its pairs pass since run {self.run_id}", "ingest")
            self.done.fixed.append(bug_id)

    def _flaky(self, pair_ids: dict) -> None:
        """Pairs whose outcome differs from the last runs' on the same commit and versions."""
        key = self.env_key
        earlier = list(
            self.c.execute(
                select(t.runs.c.id)
                .where(t.runs.c.env_key == key, t.runs.c.id != self.run_id)
                .order_by(t.runs.c.id.desc())
                .limit(5)
            ).scalars()
        )
        if not earlier:
            return
        outcomes: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for row in self.report.rows:
            if row.get("outcome") not in NO_VERDICT:
                outcomes[pair_ids[(row["test"], row["config"])]][row["outcome"]].append(self.run_id)
        query = select(t.results.c.pair_id, t.results.c.outcome, t.results.c.run_id).where(
            t.results.c.run_id.in_(earlier), t.results.c.outcome.notin_(NO_VERDICT)
        )
        for pair_id, outcome, run_id in self.c.execute(query):
            if pair_id in outcomes:
                outcomes[pair_id][outcome].append(run_id)
        changed = {pair_id: seen for pair_id, seen in outcomes.items() if len(seen) > 1}
        if not changed:
            return
        stored = {
            pair_id: json.loads(value)
            for chunk in _chunks(list(changed))
            for pair_id, value in self.c.execute(
                select(t.flaky.c.pair_id, t.flaky.c.outcomes).where(
                    t.flaky.c.env_key == key, t.flaky.c.pair_id.in_(chunk)
                )
            )
        }
        for pair_id, seen in changed.items():
            merged = {o: sorted(set(stored.get(pair_id, {}).get(o, [])) | set(runs)) for o, runs in seen.items()}
            for outcome, runs in stored.get(pair_id, {}).items():
                merged.setdefault(outcome, runs)
            values = {"outcomes": json.dumps(merged, sort_keys=True), "last_run_id": self.run_id}
            if pair_id in stored:
                self.c.execute(
                    update(t.flaky).where(t.flaky.c.pair_id == pair_id, t.flaky.c.env_key == key).values(**values)
                )
            else:
                self.c.execute(insert(t.flaky).values(pair_id=pair_id, env_key=key, **values))
        self.done.flaky = len(changed)
