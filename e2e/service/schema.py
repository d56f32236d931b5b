"""The bug database's tables (SQLAlchemy Core), for SQLite and PostgreSQL alike.

The schema is made and upgraded by the Alembic migrations in `migrations/`; this module is
what the queries are written against, and the first migration creates exactly it.

    runs         one uploaded run: what decides its verdicts (commit, versions, JIT target,
                 machine, configs) and its counts per config
    pairs        one (test, config), named once
    signatures   one signature text, named once
    results      a pair's result in a run: 10 M rows for 1,000 runs of 10,000 pairs, so it is
                 narrow (integer keys, the outcome as a short text) and clustered twice:
                 by run (its primary key) and by pair (`ix_results_pair`, a pair's history)
    bugs         one distinct bug across runs, its status and its kept bundle
    bug_runs     the runs that hit a bug, with how many pairs (a bug page without scanning results)
    bundles      reproducer bundles offered for a bug; the archive itself is a blob
    blobs        content-addressed bytes (bundle archives), in the database so that a run
                 is in whole or not at all and a backup is one copy
    events       a bug's life: opened, known, fixed, reopened, a maintainer's status
    flaky        pairs whose outcome differed between runs of one commit and versions
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(64), nullable=False, unique=True),  # digest of the run's rows: a second upload is a no-op
    Column("run_id", String(64)),  # run.json's own id
    Column("label", Text),
    Column("kind", String(16), nullable=False),  # suite | campaign | merged
    Column("branch", Text),
    Column("commit", String(64)),
    Column("env_key", String(64), nullable=False),  # digest of commit, versions and JIT target: flakiness is per env
    Column("versions", Text, nullable=False),  # JSON: torch, torch-mlir, IREE, jaxlib, tosa-tools
    Column("jit_target", Text),
    Column("machine", Text),
    Column("configs", Text, nullable=False),  # JSON list
    Column("command", Text),
    Column("started_at", String(32)),
    Column("ingested_at", Float, nullable=False),  # seconds since the epoch
    Column("pairs", Integer, nullable=False),
    Column("failing", Integer, nullable=False),
    Column("counts", Text, nullable=False),  # JSON: config -> outcome -> pairs
    Column("baseline_id", Integer, ForeignKey("runs.id")),
)
Index("ix_runs_env", runs.c.env_key)
Index("ix_runs_branch", runs.c.branch, runs.c.id)

pairs = Table(
    "pairs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("test", Text, nullable=False),
    Column("config", String(64), nullable=False),
    UniqueConstraint("test", "config", name="uq_pairs_test_config"),
)

signatures = Table(
    "signatures",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(40), nullable=False, unique=True),  # sha1 of the text: indexable whatever its length
    Column("text", Text, nullable=False),
)

results = Table(
    "results",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("pair_id", Integer, ForeignKey("pairs.id"), primary_key=True),
    Column("outcome", String(8), nullable=False),  # pass | fail | crash | timeout | memory | error | skip
    Column("expected", Boolean, nullable=False),  # an xfail entry expected a failure
    Column("signature_id", Integer, ForeignKey("signatures.id")),
    Column("bug_id", Integer, ForeignKey("bugs.id")),
    Column("duration_ms", Integer, nullable=False),
)
Index("ix_results_pair", results.c.pair_id, results.c.run_id)
# The failing few of a bug (its pairs in a run, the fixed check): only rows that hit a bug.
Index(
    "ix_results_bug",
    results.c.bug_id,
    results.c.run_id,
    sqlite_where=results.c.bug_id.isnot(None),
    postgresql_where=results.c.bug_id.isnot(None),
)

bugs = Table(
    "bugs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("ident", String(40), nullable=False, unique=True),  # sha1 of (config, key, guilty op)
    Column("config", String(64), nullable=False),
    Column("key", Text, nullable=False),  # stage | pass or kind | message without numbers and types
    Column("guilty_op", Text, nullable=False),  # "" when none is known
    Column("kind", String(32), nullable=False),  # wrong result | crash or hang | compile failure
    Column("stage", String(32), nullable=False),
    Column("signature", Text, nullable=False),  # the first signature seen, as people read it
    # Where its reduced program fails, at any config (`BugRecord.root`: guilty op and pass, or
    # what broke the types): bugs of one root are one compiler bug.
    Column("root", Text),
    Column("status", String(16), nullable=False),  # new | known | fixed | invalid | duplicate
    Column("status_reason", Text),
    Column("duplicate_of", Integer, ForeignKey("bugs.id")),
    Column("first_run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("last_run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("first_seen", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("hits", Integer, nullable=False),  # failing pairs, over every run
    Column("fixed_run_id", Integer, ForeignKey("runs.id")),  # first passed in
    Column("last_failed_run_id", Integer, ForeignKey("runs.id")),  # when fixed: the last run it failed in
    Column("bundle_id", Integer, ForeignKey("bundles.id", use_alter=True, name="fk_bugs_bundle")),
    Column("retest", Text),  # (0002) JSON: the last retest's verdict, versions and time
    Column("release_range", Text),  # (0002) JSON: the releases tried and the range found
)
Index("ix_bugs_status", bugs.c.status, bugs.c.config)
Index("ix_bugs_first_run", bugs.c.first_run_id)

bug_runs = Table(
    "bug_runs",
    metadata,
    Column("bug_id", Integer, ForeignKey("bugs.id"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("pairs", Integer, nullable=False),
)
Index("ix_bug_runs_run", bug_runs.c.run_id)

blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

bundles = Table(
    "bundles",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("bug_id", Integer, ForeignKey("bugs.id"), nullable=False),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("test", Text, nullable=False),
    Column("config", String(64), nullable=False),
    Column("blob", String(64), ForeignKey("blobs.sha256"), nullable=False),
    Column("size", Integer, nullable=False),  # bytes of repro.mlir: smaller replaces larger
    Column("verified", Boolean),  # its repro.py re-verified in a fresh process; None: not recorded
    Column("repro_mlir", Text, nullable=False),
    Column("readme", Text, nullable=False),
    Column("files", Text, nullable=False),  # JSON list of the archive's files
)
Index("ix_bundles_bug", bundles.c.bug_id)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("bug_id", Integer, ForeignKey("bugs.id"), nullable=False),
    Column("run_id", Integer, ForeignKey("runs.id")),
    Column("at", Float, nullable=False),
    Column("kind", String(16), nullable=False),  # opened | known | fixed | reopened | status
    Column("status", String(16), nullable=False),  # the status after it
    Column("reason", Text),
    Column("actor", Text),  # "ingest", or the token's name
)
Index("ix_events_bug", events.c.bug_id)

flaky = Table(
    "flaky",
    metadata,
    Column("pair_id", Integer, ForeignKey("pairs.id"), primary_key=True),
    Column("env_key", String(64), primary_key=True),
    Column("outcomes", Text, nullable=False),  # JSON: outcome -> run ids
    Column("last_run_id", Integer, ForeignKey("runs.id"), nullable=False),
)

# Revision 0002: the service's jobs (campaign blocks, reductions, retests, release ranges,
# suite shards), run on a Dask cluster; a job's result is ingested once (`run_id`).
jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(32), nullable=False),  # campaign | block | reduce | retest | release-range | suite | shard
    Column("args", Text, nullable=False),  # JSON
    Column("state", String(16), nullable=False),  # pending | running | done | failed
    Column("attempts", Integer, nullable=False),
    Column("worker", Text),
    Column("log", Text),
    Column("result", Text),  # JSON
    Column("parent_id", Integer, ForeignKey("jobs.id")),
    Column("run_id", Integer, ForeignKey("runs.id")),  # the run it ingested: at most once
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
)
Index("ix_jobs_state", jobs.c.state, jobs.c.id)
Index("ix_jobs_parent", jobs.c.parent_id)
