"""The service's jobs: rows of the database run on a Dask cluster (a local one by default,
`serve --scheduler tcp://HOST:PORT` for a team's), so a restarted service picks up what was
pending or running, and each job's result is ingested once.

| kind | what a worker does | what the service does with it |
|---|---|---|
| `campaign` | (nothing: a parent) | keeps its block jobs in flight, block after block of fresh seeds, until its programs are run (none given: until stopped) |
| `block` | one block of a campaign (`e2e.fuzz.cluster.run_block`) | ingests it as a run; each new wrong result or crash gets a `reduce` job |
| `reduce` | the bug's first program again, alone, with the MLIR reducer at full length | ingests it: its verified bundle is offered to the bug |
| `release-range` | a bug's bundle run on a component's releases (`e2e.service.releases`) | keeps the range on the bug: its page and issue text show it |
| `retest` | each open or fixed bug's bundle run again (a subprocess, time and memory limits); submitted by itself when the service starts on workers whose versions differ from the last retest's | a bundle that no longer reproduces marks its bug fixed with the worker's versions; a fixed bug's that does reopens it |
| `suite` | (a parent) the suite's shards as `shard` jobs | merges the shards (`e2e.tools.merge`) and ingests the merged run once |

A job's state: pending, running (submitted to the cluster), done, failed (its log says why).
A worker that dies takes its attempt with it; Dask runs the task again elsewhere (twice at
most). A service killed while jobs run finds them `running` when it starts again, and submits
them again: a job whose run was ingested has its `run_id`, set in the ingest's own transaction,
so its result is never ingested twice.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import traceback
from pathlib import Path

from sqlalchemy import func, insert, select, update

from e2e.service import schema as t
from e2e.service.store import OPEN, Store

KINDS = ("campaign", "block", "reduce", "retest", "release-range", "suite", "shard")
ACTIVE = ("pending", "running")
RETRIES = 2  # Dask reruns a task whose worker died this many times


def submit(store: Store, kind: str, args: dict, parent_id: int | None = None) -> int:
    """A new pending job; its id."""
    with store.write_engine.begin() as connection:
        return _insert(connection, kind, args, parent_id)


def _insert(connection, kind: str, args: dict, parent_id: int | None = None) -> int:
    """A new pending job, in the caller's transaction."""
    if kind not in KINDS:
        raise ValueError(f"job kind {kind!r}: one of {', '.join(KINDS)}")
    return connection.execute(
        insert(t.jobs).values(
            kind=kind, args=json.dumps(args), state="pending", attempts=0, parent_id=parent_id, created_at=time.time()
        )
    ).inserted_primary_key[0]


def jobs(store: Store, state: str | None = None, kind: str | None = None, limit: int = 500) -> list[dict]:
    query = select(t.jobs).order_by(t.jobs.c.id.desc()).limit(limit)
    if state:
        query = query.where(t.jobs.c.state == state)
    if kind:
        query = query.where(t.jobs.c.kind == kind)
    with store.engine.connect() as connection:
        return [_job(row) for row in connection.execute(query).mappings()]


def job(store: Store, job_id: int) -> dict | None:
    with store.engine.connect() as connection:
        row = connection.execute(select(t.jobs).where(t.jobs.c.id == job_id)).mappings().first()
    return None if row is None else _job(row)


def _job(row) -> dict:
    found = dict(row)
    found["args"] = json.loads(found["args"])
    found["result"] = json.loads(found["result"]) if found["result"] else None
    return found


def _set(store: Store, job_id: int, **values) -> None:
    if "result" in values and not isinstance(values["result"], str | None):
        values["result"] = json.dumps(values["result"])
    with store.write_engine.begin() as connection:
        connection.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(**values))


class JobRunner:
    """Runs the database's jobs on a Dask client's cluster, from a thread of the service."""

    def __init__(self, store: Store, client, data_dir: Path, poll: float = 1.0):
        self.store = store
        self.client = client
        self.data_dir = Path(data_dir)
        self.poll = poll
        self.futures: dict[int, object] = {}  # job id -> its Dask future
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._versions = None  # the workers' versions, asked once at start (a retest when they changed)

    def start(self) -> JobRunner:
        """Requeue what a previous service left running, then run jobs until `stop`."""
        with self.store.write_engine.begin() as connection:
            connection.execute(update(t.jobs).where(t.jobs.c.state == "running").values(state="pending"))
        from e2e.service import tasks

        self._versions = self.client.submit(tasks.worker_versions, pure=False)
        self._thread = threading.Thread(target=self._loop, name="e2e-jobs", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - one bad step must not end the service's jobs
                traceback.print_exc()
            self._stop.wait(self.poll)

    def step(self) -> None:
        """Feed campaigns, submit pending jobs, take finished ones."""
        if self._versions is not None and self._versions.done():
            self._retest_if_versions_changed(self._versions.result())
            self._versions = None
        for campaign in jobs(self.store, state="running", kind="campaign"):
            self._feed(campaign)
        for suite in jobs(self.store, state="running", kind="suite"):
            self._merge_when_done(suite)
        for pending in reversed(jobs(self.store, state="pending")):
            self._submit(pending)
        for job_id, future in list(self.futures.items()):
            if future.done():
                del self.futures[job_id]
                self._finish(job(self.store, job_id), future)

    def _retest_if_versions_changed(self, versions: dict) -> None:
        """The workers' versions differ from those of the last retest: every bug's bundle again."""
        last = jobs(self.store, state="done", kind="retest", limit=1)
        if last and last[0]["result"] and last[0]["result"].get("versions") != versions:
            before = last[0]["result"]["versions"]
            changed = sorted(k for k in set(before) | set(versions) if before.get(k) != versions.get(k))
            why = ", ".join(f"{k} {before.get(k, '-')} -> {versions.get(k, '-')}" for k in changed)
            submit(self.store, "retest", {"why": f"the workers' versions changed: {why}"})

    # Submitting.

    def _submit(self, pending: dict) -> None:
        from e2e.service import tasks

        kind, args = pending["kind"], pending["args"]
        values = {"state": "running", "attempts": pending["attempts"] + 1, "started_at": time.time()}
        if kind in ("campaign", "suite"):
            with self.store.write_engine.begin() as connection:
                connection.execute(update(t.jobs).where(t.jobs.c.id == pending["id"]).values(**values))
                # A suite's shards, made once, with it: a restarted service finds them there.
                if kind == "suite" and not self._children(pending["id"]):
                    for index in range(1, args["shards"] + 1):
                        _insert(connection, "shard", {**args, "index": index}, parent_id=pending["id"])
            return
        if kind == "retest":
            args = {**args, "bundles": self._open_bundles(args.get("bugs"))}
        if kind == "release-range":
            [bundle] = self._open_bundles([args["bug"]]) or [None]
            if bundle is None:
                _set(
                    self.store,
                    pending["id"],
                    state="failed",
                    log=f"bug {args['bug']} has no bundle",
                    finished_at=time.time(),
                )
                return
            args = {**args, "archive": bundle["archive"]}
        function = getattr(tasks, kind.replace("-", "_"))
        self.futures[pending["id"]] = self.client.submit(function, args, pure=False, retries=RETRIES)
        _set(self.store, pending["id"], **values)

    def _feed(self, campaign: dict) -> None:
        """Keep a campaign's blocks in flight: as many as the cluster has workers, and one more."""
        args, result = campaign["args"], campaign["result"] or {"next_block": 0, "programs": 0}
        children = self._children(campaign["id"])
        flying = sum(1 for c in children if c["state"] in ACTIVE)
        width = len(self.client.scheduler_info()["workers"]) + 1
        wanted = args.get("programs")
        blocks = []
        while flying + len(blocks) < width and (wanted is None or result["programs"] < wanted):
            count = args["block"] if wanted is None else min(args["block"], wanted - result["programs"])
            blocks.append({**args, "first_seed": args["seed"] + result["next_block"] * args["block"], "count": count})
            result = {"next_block": result["next_block"] + 1, "programs": result["programs"] + count}
        if blocks:  # the blocks and the campaign's progress in one transaction: no seeds run twice or skipped
            with self.store.write_engine.begin() as connection:
                for block in blocks:
                    _insert(connection, "block", block, parent_id=campaign["id"])
                connection.execute(
                    update(t.jobs).where(t.jobs.c.id == campaign["id"]).values(result=json.dumps(result))
                )
        if wanted is not None and result["programs"] >= wanted and not any(c["state"] in ACTIVE for c in children):
            if children and len(children) == result["next_block"]:
                _set(self.store, campaign["id"], state="done", finished_at=time.time())

    def _children(self, parent_id: int) -> list[dict]:
        with self.store.engine.connect() as connection:
            rows = connection.execute(select(t.jobs).where(t.jobs.c.parent_id == parent_id)).mappings()
            return [_job(row) for row in rows]

    def _open_bundles(self, bug_ids: list[int] | None) -> list[dict]:
        """The kept bundles of the open and the fixed bugs (a fixed one that fails again is
        reopened), or of `bug_ids`, as bytes."""
        query = (
            select(t.bugs.c.id, t.bugs.c.status, t.blobs.c.data)
            .select_from(
                t.bugs.join(t.bundles, t.bundles.c.id == t.bugs.c.bundle_id).join(
                    t.blobs, t.blobs.c.sha256 == t.bundles.c.blob
                )
            )
            .where(t.bugs.c.id.in_(bug_ids) if bug_ids else t.bugs.c.status.in_((*OPEN, "fixed")))
        )
        with self.store.engine.connect() as connection:
            return [{"bug": bug, "status": status, "archive": data} for bug, status, data in connection.execute(query)]

    # Finishing.

    def _finish(self, finished: dict, future) -> None:
        try:
            outcome = future.result()
        except Exception as error:  # noqa: BLE001 - the task's failure is the job's, with its log
            _set(
                self.store,
                finished["id"],
                state="failed",
                log=f"{type(error).__name__}: {error}",
                finished_at=time.time(),
            )
            return
        try:
            getattr(self, f"_took_{finished['kind'].replace('-', '_')}")(finished, outcome)
        except Exception as error:  # noqa: BLE001
            _set(
                self.store, finished["id"], state="failed", log=traceback.format_exc()[-4000:], finished_at=time.time()
            )
            raise error

    def _folder(self, job_id: int) -> Path:
        return self.data_dir / "jobs" / str(job_id)

    def _ingest_block(self, finished: dict, outcome, label: str) -> object:
        from e2e.fuzz.cluster import unpack_block
        from e2e.service.reports import read_reports

        folder = self._folder(finished["id"])
        unpack_block(outcome, folder)
        if outcome.exit_status not in (0, 1):
            tail = "\n".join(outcome.output.splitlines()[-30:])
            _set(self.store, finished["id"], state="failed", log=tail, worker=outcome.worker, finished_at=time.time())
            return None
        done = self.store.ingest(read_reports(folder, parse_ir=False), label, job_id=finished["id"])
        _set(self.store, finished["id"], worker=outcome.worker, log="\n".join(outcome.output.splitlines()[-5:]))
        shutil.rmtree(folder / "cache", ignore_errors=True)
        return done

    def _took_block(self, finished: dict, outcome) -> None:
        args = finished["args"]
        label = f"campaign {finished['parent_id']} seeds {args['first_seed']}..{args['first_seed'] + args['count'] - 1}"
        done = self._ingest_block(finished, outcome, label)
        if done is None or not done.created:
            return
        for bug in done.new_bugs:
            reduced = self._reducible(bug)
            if reduced is not None:
                submit(self.store, "reduce", {**args, **reduced}, parent_id=finished["id"])

    def _reducible(self, bug_id: int) -> dict | None:
        """A new bug's first generated program and config, when its failure runs (a wrong
        result or a crash: compile failures are bundled by every run already)."""
        from e2e.generate.register import seed_of

        with self.store.engine.connect() as connection:
            row = connection.execute(
                select(t.bugs.c.kind, t.bugs.c.config, t.pairs.c.test)
                .select_from(
                    t.bugs.join(
                        t.results, (t.results.c.bug_id == t.bugs.c.id) & (t.results.c.run_id == t.bugs.c.first_run_id)
                    ).join(t.pairs, t.pairs.c.id == t.results.c.pair_id)
                )
                .where(t.bugs.c.id == bug_id)
                .limit(1)
            ).first()
        if row is None or row.kind not in ("wrong result", "crash or hang") or seed_of(row.test) is None:
            return None
        return {"bug": bug_id, "seed": seed_of(row.test), "config": row.config}

    def _took_reduce(self, finished: dict, outcome) -> None:
        self._ingest_block(finished, outcome, f"reduction of bug {finished['args']['bug']}")

    def _took_shard(self, finished: dict, outcome) -> None:
        from e2e.fuzz.cluster import unpack_block

        unpack_block(outcome, self._folder(finished["parent_id"]) / f"shard-{finished['args']['index']}")
        _set(self.store, finished["id"], state="done", worker=outcome.worker, finished_at=time.time())

    def _merge_when_done(self, suite: dict) -> None:
        from e2e.service.reports import read_reports
        from e2e.tools.merge import merge

        children = self._children(suite["id"])
        if len(children) < suite["args"]["shards"] or any(c["state"] in ACTIVE for c in children):
            return
        folder = self._folder(suite["id"])
        shards = sorted(folder.glob("shard-*"))
        merged = folder / "merged"
        try:
            merge(shards, merged, allow_missing=any(c["state"] == "failed" for c in children))
            self.store.ingest(read_reports(merged, parse_ir=False), suite["args"].get("label"), job_id=suite["id"])
        except Exception:  # noqa: BLE001 - the merge's refusal is the suite job's failure
            _set(self.store, suite["id"], state="failed", log=traceback.format_exc()[-4000:], finished_at=time.time())

    def _took_release_range(self, finished: dict, outcome: dict) -> None:
        found = {**outcome["range"], "markdown": outcome["markdown"]}
        self.store.set_release_range(finished["args"]["bug"], found, finished["id"], outcome["worker"])

    def _took_retest(self, finished: dict, outcome: dict) -> None:
        self.store.retested(outcome["verdicts"], outcome["versions"], finished["id"], outcome.get("worker"))


def counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as connection:
        return dict(connection.execute(select(t.jobs.c.state, func.count()).group_by(t.jobs.c.state)).all())
