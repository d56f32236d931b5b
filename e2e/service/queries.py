"""What the pages and the API show, read from the bug database: each function takes the
`Store` and returns plain values (dicts and lists), the JSON an `/api/` route answers and
the context its page renders."""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import and_, func, select

from e2e.service import schema as t
from e2e.service.store import OPEN, Store

BUG_COLUMNS = (
    t.bugs.c.id,
    t.bugs.c.config,
    t.bugs.c.kind,
    t.bugs.c.stage,
    t.bugs.c.key,
    t.bugs.c.guilty_op,
    t.bugs.c.signature,
    t.bugs.c.root,
    t.bugs.c.status,
    t.bugs.c.status_reason,
    t.bugs.c.duplicate_of,
    t.bugs.c.first_run_id,
    t.bugs.c.last_run_id,
    t.bugs.c.first_seen,
    t.bugs.c.last_seen,
    t.bugs.c.hits,
    t.bugs.c.fixed_run_id,
    t.bugs.c.last_failed_run_id,
    t.bugs.c.bundle_id,
    t.bugs.c.retest,
    t.bugs.c.release_range,
)


def title(bug: dict) -> str:
    """The one line a maintainer would read first: config, what went wrong, where."""
    where = bug["key"].split(" | ")[1] if " | " in bug["key"] else bug["stage"]
    op = f" at {bug['guilty_op']}" if bug["guilty_op"] else ""
    return f"{bug['config']}: {bug['kind']} in {bug['stage']} ({where}){op}"


def _bug(row) -> dict:
    bug = dict(row._mapping)
    bug["title"] = title(bug)
    for name in ("retest", "release_range"):
        bug[name] = json.loads(bug[name]) if bug.get(name) else None
    return bug


def bugs(
    store: Store,
    config: str | None = None,
    stage: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    since_run: int | None = None,
    root: str | None = None,
    limit: int = 500,
    offset: int = 0,
) -> dict:
    """The bug list, newest first, filtered: `status` `open` means new or known; `since_run`
    keeps the bugs first seen after that run."""
    conditions = []
    for column, value in ((t.bugs.c.config, config), (t.bugs.c.stage, stage), (t.bugs.c.kind, kind)):
        if value:
            conditions.append(column == value)
    if status == "open":
        conditions.append(t.bugs.c.status.in_(OPEN))
    elif status:
        conditions.append(t.bugs.c.status == status)
    if since_run is not None:
        conditions.append(t.bugs.c.first_run_id > since_run)
    if root:
        conditions.append(t.bugs.c.root == root)
    where = and_(True, *conditions)
    with store.engine.connect() as c:
        total = c.execute(select(func.count()).select_from(t.bugs).where(where)).scalar()
        rows = c.execute(
            select(*BUG_COLUMNS, t.bundles.c.verified.label("bundle_verified"))
            .select_from(t.bugs.outerjoin(t.bundles, t.bundles.c.id == t.bugs.c.bundle_id))
            .where(where)
            .order_by(t.bugs.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        found = [_bug(row) for row in rows]
        facets = {
            name: dict(c.execute(select(column, func.count()).group_by(column)).all())
            for name, column in (("config", t.bugs.c.config), ("status", t.bugs.c.status), ("stage", t.bugs.c.stage))
        }
    return {"total": total, "bugs": found, "facets": facets}


def bug(store: Store, bug_id: int, runs_shown: int = 50) -> dict | None:
    """One bug: its fields, kept bundle, the runs that hit it (newest first) and the
    versions they ran, its pairs in the last run that hit it, its life, and the bugs of its root."""
    with store.engine.connect() as c:
        row = c.execute(select(*BUG_COLUMNS).where(t.bugs.c.id == bug_id)).first()
        if row is None:
            return None
        found = _bug(row)
        bundle = c.execute(
            select(
                t.bundles.c.id,
                t.bundles.c.test,
                t.bundles.c.config,
                t.bundles.c.size,
                t.bundles.c.verified,
                t.bundles.c.repro_mlir,
                t.bundles.c.readme,
                t.bundles.c.files,
                t.bundles.c.run_id,
                t.blobs.c.size.label("archive_size"),
            )
            .select_from(t.bundles.join(t.blobs, t.blobs.c.sha256 == t.bundles.c.blob))
            .where(t.bundles.c.id == found["bundle_id"])
        ).first()
        found["bundle"] = None if bundle is None else {**bundle._mapping, "files": json.loads(bundle.files)}
        found["runs_total"] = c.execute(
            select(func.count()).select_from(t.bug_runs).where(t.bug_runs.c.bug_id == bug_id)
        ).scalar()
        found["runs"] = [
            {**r._mapping, "versions": json.loads(r.versions)}
            for r in c.execute(
                select(
                    t.runs.c.id,
                    t.runs.c.label,
                    t.runs.c.kind,
                    t.runs.c.branch,
                    t.runs.c.commit,
                    t.runs.c.versions,
                    t.runs.c.ingested_at,
                    t.bug_runs.c.pairs,
                )
                .select_from(t.bug_runs.join(t.runs, t.runs.c.id == t.bug_runs.c.run_id))
                .where(t.bug_runs.c.bug_id == bug_id)
                .order_by(t.bug_runs.c.run_id.desc())
                .limit(runs_shown)
            )
        ]
        distinct_versions = {json.dumps(r["versions"], sort_keys=True) for r in found["runs"]}
        found["versions"] = [json.loads(v) for v in sorted(distinct_versions)]
        found["pairs"] = [
            {"test": test, "config": config}
            for test, config in c.execute(
                select(t.pairs.c.test, t.pairs.c.config)
                .select_from(t.results.join(t.pairs, t.pairs.c.id == t.results.c.pair_id))
                .where(t.results.c.bug_id == bug_id, t.results.c.run_id == found["last_run_id"])
                .order_by(t.pairs.c.test)
                .limit(200)
            )
        ]
        found["events"] = [
            dict(e._mapping)
            for e in c.execute(select(t.events).where(t.events.c.bug_id == bug_id).order_by(t.events.c.id))
        ]
        found["root_bugs"] = []
        if found["root"]:
            found["root_bugs"] = [
                _bug(r)
                for r in c.execute(
                    select(*BUG_COLUMNS).where(t.bugs.c.root == found["root"], t.bugs.c.id != bug_id).limit(50)
                )
            ]
        found["configs"] = sorted({found["config"], *(b["config"] for b in found["root_bugs"])})
    return found


def bundle_archive(store: Store, bug_id: int) -> tuple[str, bytes] | None:
    """The kept bundle of a bug as (file name, tar.gz bytes)."""
    with store.engine.connect() as c:
        row = c.execute(
            select(t.bundles.c.test, t.bundles.c.config, t.blobs.c.data)
            .select_from(
                t.bugs.join(t.bundles, t.bundles.c.id == t.bugs.c.bundle_id).join(
                    t.blobs, t.blobs.c.sha256 == t.bundles.c.blob
                )
            )
            .where(t.bugs.c.id == bug_id)
        ).first()
    if row is None:
        return None
    return f"bug-{bug_id}-{row.test}-{row.config}.tar.gz", row.data


RUN_COLUMNS = (
    t.runs.c.id,
    t.runs.c.label,
    t.runs.c.kind,
    t.runs.c.branch,
    t.runs.c.commit,
    t.runs.c.env_key,
    t.runs.c.versions,
    t.runs.c.jit_target,
    t.runs.c.machine,
    t.runs.c.configs,
    t.runs.c.command,
    t.runs.c.started_at,
    t.runs.c.ingested_at,
    t.runs.c.pairs,
    t.runs.c.failing,
    t.runs.c.counts,
)


def _run(row) -> dict:
    run = dict(row._mapping)
    for name in ("versions", "configs", "counts"):
        run[name] = json.loads(run[name])
    return run


def runs(store: Store, branch: str | None = None, limit: int = 100, offset: int = 0) -> dict:
    where = t.runs.c.branch == branch if branch else and_(True)
    with store.engine.connect() as c:
        total = c.execute(select(func.count()).select_from(t.runs).where(where)).scalar()
        found = [
            _run(r)
            for r in c.execute(
                select(*RUN_COLUMNS).where(where).order_by(t.runs.c.id.desc()).limit(limit).offset(offset)
            )
        ]
    return {"total": total, "runs": found}


def run(store: Store, run_id: int, baseline: int | None = None) -> dict | None:
    """A run: counts per config, its new, reopened and fixed bugs, and what changed since its
    baseline (`baseline`, else the run before it on its branch, else the run before it)."""
    with store.engine.connect() as c:
        row = c.execute(select(*RUN_COLUMNS).where(t.runs.c.id == run_id)).first()
        if row is None:
            return None
        found = _run(row)
        if baseline is None:
            earlier = select(t.runs.c.id).where(t.runs.c.id < run_id).order_by(t.runs.c.id.desc()).limit(1)
            baseline = (
                c.execute(earlier.where(t.runs.c.branch == found["branch"])).scalar() or c.execute(earlier).scalar()
            )
        found["baseline"] = baseline
        found["new_bugs"] = [_bug(r) for r in c.execute(select(*BUG_COLUMNS).where(t.bugs.c.first_run_id == run_id))]
        found["fixed_bugs"] = [_bug(r) for r in c.execute(select(*BUG_COLUMNS).where(t.bugs.c.fixed_run_id == run_id))]
        reopened = select(t.events.c.bug_id).where(t.events.c.run_id == run_id, t.events.c.kind == "reopened")
        found["reopened_bugs"] = [_bug(r) for r in c.execute(select(*BUG_COLUMNS).where(t.bugs.c.id.in_(reopened)))]
        found["bugs_hit"] = c.execute(
            select(func.count()).select_from(t.bug_runs).where(t.bug_runs.c.run_id == run_id)
        ).scalar()
    found["pass_rate"] = {config: pass_rate(counts) for config, counts in found["counts"].items()}
    found["changes"] = diff(store, baseline, run_id) if baseline else None
    return found


def pass_rate(counts: dict[str, int]) -> float | None:
    """Of a config's pairs with a verdict (not skipped), the share that passed."""
    judged = sum(n for final, n in counts.items() if final != "skipped")
    return round(counts.get("passed", 0) / judged, 4) if judged else None


def rows_of(store: Store, run_id: int) -> list[dict]:
    """A run's results as result rows (`e2e.framework.results_files`' form), for `e2e.tools.diff`."""
    query = (
        select(
            t.pairs.c.test,
            t.pairs.c.config,
            t.results.c.outcome,
            t.results.c.expected,
            t.results.c.duration_ms,
            t.signatures.c.text.label("signature"),
            t.results.c.bug_id,
        )
        .select_from(
            t.results.join(t.pairs, t.pairs.c.id == t.results.c.pair_id).outerjoin(
                t.signatures, t.signatures.c.id == t.results.c.signature_id
            )
        )
        .where(t.results.c.run_id == run_id)
    )
    with store.engine.connect() as c:
        found = []
        for r in c.execute(query):
            failing = r.outcome not in ("pass", "skip")
            final = {"pass": "passed", "skip": "skipped"}.get(r.outcome, "failed")
            if r.expected:
                final = "xfailed" if failing else "xpassed"
            found.append(
                {
                    "test": r.test,
                    "config": r.config,
                    "outcome": r.outcome,
                    "final": final,
                    "signature": r.signature,
                    "duration": r.duration_ms / 1000,
                    "stage": r.signature.split(" | ")[0] if r.signature else None,
                    "bug_id": r.bug_id,
                }
            )
    return found


def diff(store: Store, base_run: int, new_run: int) -> dict:
    """What changed between two runs, as `python -m e2e.tools.diff` computes it (its `compare`, over
    the database's rows): per kind, the pairs with their outcomes."""
    from e2e.tools.diff import compare

    changes = compare(rows_of(store, base_run), rows_of(store, new_run))
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for change in changes.changes:
        if change.kind == "slower":
            continue
        by_kind[change.kind].append(
            {
                "test": change.test,
                "config": change.config,
                "change": change.describe(),
                "bug_id": (change.new or {}).get("bug_id"),
            }
        )
    return {"base": base_run, "new": new_run, "counts": {k: len(v) for k, v in by_kind.items()}, "changes": by_kind}


def pair_history(store: Store, test: str, config: str, limit: int = 200) -> dict | None:
    """A pair's outcome and signature per run, newest first, and whether it is flaky."""
    with store.engine.connect() as c:
        pair_id = c.execute(select(t.pairs.c.id).where(t.pairs.c.test == test, t.pairs.c.config == config)).scalar()
        if pair_id is None:
            return None
        history = [
            dict(r._mapping)
            for r in c.execute(
                select(
                    t.results.c.run_id,
                    t.results.c.outcome,
                    t.results.c.expected,
                    t.results.c.bug_id,
                    t.results.c.duration_ms,
                    t.signatures.c.text.label("signature"),
                    t.runs.c.label,
                    t.runs.c.branch,
                    t.runs.c.commit,
                    t.runs.c.ingested_at,
                )
                .select_from(
                    t.results.join(t.runs, t.runs.c.id == t.results.c.run_id).outerjoin(
                        t.signatures, t.signatures.c.id == t.results.c.signature_id
                    )
                )
                .where(t.results.c.pair_id == pair_id)
                .order_by(t.results.c.run_id.desc())
                .limit(limit)
            )
        ]
        flakes = [
            {"env_key": env, "outcomes": json.loads(outcomes)}
            for env, outcomes in c.execute(
                select(t.flaky.c.env_key, t.flaky.c.outcomes).where(t.flaky.c.pair_id == pair_id)
            )
        ]
    return {"test": test, "config": config, "history": history, "flaky": flakes}


def flaky(store: Store, config: str | None = None, limit: int = 500) -> list[dict]:
    """Pairs whose outcome differed between runs of one commit and versions, newest first."""
    query = (
        select(t.pairs.c.test, t.pairs.c.config, t.flaky.c.env_key, t.flaky.c.outcomes, t.flaky.c.last_run_id)
        .select_from(t.flaky.join(t.pairs, t.pairs.c.id == t.flaky.c.pair_id))
        .order_by(t.flaky.c.last_run_id.desc(), t.pairs.c.test)
        .limit(limit)
    )
    if config:
        query = query.where(t.pairs.c.config == config)
    with store.engine.connect() as c:
        return [{**r._mapping, "outcomes": json.loads(r.outcomes)} for r in c.execute(query)]


def trends(store: Store, limit: int = 200) -> dict:
    """Per run (oldest first, the last `limit`): bugs first seen and fixed in it, and each
    config's pass rate."""
    with store.engine.connect() as c:
        recent = list(
            c.execute(
                select(t.runs.c.id, t.runs.c.label, t.runs.c.ingested_at, t.runs.c.counts)
                .order_by(t.runs.c.id.desc())
                .limit(limit)
            )
        )[::-1]
        first = recent[0].id if recent else 0
        opened = dict(
            c.execute(
                select(t.bugs.c.first_run_id, func.count())
                .where(t.bugs.c.first_run_id >= first)
                .group_by(t.bugs.c.first_run_id)
            ).all()
        )
        fixed = dict(
            c.execute(
                select(t.events.c.run_id, func.count())
                .where(t.events.c.kind == "fixed", t.events.c.run_id >= first)
                .group_by(t.events.c.run_id)
            ).all()
        )
    points = []
    for r in recent:
        counts = json.loads(r.counts)
        points.append(
            {
                "run": r.id,
                "label": r.label,
                "at": r.ingested_at,
                "new_bugs": opened.get(r.id, 0),
                "fixed_bugs": fixed.get(r.id, 0),
                "pass_rate": {config: pass_rate(n) for config, n in counts.items()},
            }
        )
    return {"runs": points}


def export_xfails(store: Store, config: str) -> str:
    """The xfail set of `config` as the database knows it, in the format `update_xfails`
    writes: each pair an open bug hit the last time it was seen, its reason the bug's
    outcome and signature; a pair flaky on some build says so (`flaky:`)."""
    from e2e.configs.xfails import XfailEntry, format_xfails

    with store.engine.connect() as c:
        rows = c.execute(
            select(t.pairs.c.test, t.results.c.outcome, t.signatures.c.text, t.bugs.c.id)
            .select_from(
                t.bugs.join(
                    t.results, (t.results.c.bug_id == t.bugs.c.id) & (t.results.c.run_id == t.bugs.c.last_run_id)
                )
                .join(t.pairs, t.pairs.c.id == t.results.c.pair_id)
                .outerjoin(t.signatures, t.signatures.c.id == t.results.c.signature_id)
            )
            .where(t.bugs.c.config == config, t.bugs.c.status.in_(OPEN))
        ).all()
        flaky_tests = {
            test
            for (test,) in c.execute(
                select(t.pairs.c.test)
                .select_from(t.flaky.join(t.pairs, t.pairs.c.id == t.flaky.c.pair_id))
                .where(t.pairs.c.config == config)
            )
        }
    entries = {}
    for test, outcome, signature, bug_id in rows:
        if test in flaky_tests:
            reason = f"flaky: outcome differs between runs of one build (service bug {bug_id})"
        else:
            reason = f"{outcome}: {signature}" if signature else f"{outcome}: (no signature)"
        entries[test] = XfailEntry(test, reason, None, 0)
    return format_xfails(list(entries.values()))
