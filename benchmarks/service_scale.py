"""The reproducer service at a team's scale: a database of N runs of P pairs, built through
the service's own ingest from real runs' rows, then the figures a team feels.

    python benchmarks/service_scale.py --source reports/suite --source reports/fuzz \\
        --db /tmp/service-bench.db --runs 1000 --pairs 10000 [--build-only | --measure-only]

Building: the sources' rows (real runs of the suite, a campaign), the first `--pairs` of
them, are run k's rows with history of its own, seeded: each run, a few pairs start failing
with a signature of a real failing row (a bug born; 0.2% of pairs a run) and stay failing for
a run count drawn between 1 and 200 (then fixed); 0.5% of pairs flip on every other run of one
commit (flaky); the commit changes every 3 runs. Each run goes through `Store.ingest`, as an
upload would after unpacking.

Measuring, from a cold start (a new server process on the built database): the ingest of one
more run of `--pairs` pairs (through the HTTP upload, and the store alone), the bug list, a
bug page and a pair's history (each `--requests` times over random bugs and pairs: p50, p95),
and the database's size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from e2e.framework.results_files import load_rows  # noqa: E402
from e2e.fuzz.records import group_failures  # noqa: E402
from e2e.service.reports import RunReport  # noqa: E402

KEEP = ("test", "config", "outcome", "stage", "signature", "final", "duration", "error")


def source_rows(sources: list[str], pairs: int) -> list[dict]:
    rows, seen = [], set()
    for source in sources:
        for row in load_rows(source)[0]:
            if (row["test"], row["config"]) not in seen:
                seen.add((row["test"], row["config"]))
                rows.append({k: row.get(k) for k in KEEP})
    rows.sort(key=lambda r: (r["test"], r["config"]))
    if len(rows) < pairs:
        raise SystemExit(f"the sources hold {len(rows)} pairs, fewer than --pairs {pairs}")
    return rows[:pairs]


def memoize_failures() -> None:
    """The client groups a run's failures before it uploads (`group_failures`); here the same
    rows recur in every run, so each row's `Failure` is computed once (the build measures
    the service's ingest, not the client's grouping)."""
    from e2e.fuzz import bugs

    original = bugs.Failure.of.__func__
    seen: dict = {}

    def of(cls, result, site: bool = True):
        key = (result.test, result.config, result.outcome, result.signature, result.stage, site)
        if key not in seen:
            seen[key] = original(cls, result, site)
        return seen[key]

    bugs.Failure.of = classmethod(of)


class History:
    """Runs of the same pairs with a life of their own (see the module doc), seeded."""

    def __init__(self, rows: list[dict], seed: int = 0):
        self.rows = rows
        self.random = random.Random(seed)
        self.failing_rows = [r for r in rows if r["outcome"] not in ("pass", "skip") and r.get("signature")]
        self.passing = [i for i, r in enumerate(rows) if r["outcome"] == "pass"]
        self.broken: dict[int, tuple[int, dict]] = {}  # pair index -> (last run it fails in, the failure)
        self.flaky = set(self.random.sample(self.passing, len(rows) // 200))

    def run(self, k: int, run_id: str | None = None) -> RunReport:
        for index in self.random.sample(self.passing, max(1, len(self.rows) // 500)):
            failure = self.random.choice(self.failing_rows)
            self.broken[index] = (k + self.random.randint(1, 200), failure)
        rows = []
        for index, row in enumerate(self.rows):
            row = {**row, "config": row["config"]}
            until, failure = self.broken.get(index, (-1, None))
            if failure is not None and k <= until:
                row.update(
                    outcome=failure["outcome"], stage=failure["stage"], signature=failure["signature"], final="failed"
                )
            elif index in self.flaky and k % 2:
                row.update(outcome="fail", stage="compare", signature="compare | values", final="failed")
            rows.append(row)
        run = {
            "run_id": run_id or f"bench{k}",
            "commit": f"{k // 3:040x}",
            "branch": "main",
            "jit_target": "x86-64-v2",
            "versions": {"torch": "2.13.0+cpu", "torch-mlir": "20261001"},
            "configs": sorted({r["config"] for r in rows}),
        }
        return RunReport(Path("/nonexistent"), run, rows, group_failures(rows, Path("/nonexistent"), parse_ir=False))


def build(args, rows: list[dict]) -> None:
    from e2e.service.store import Store

    store = Store(args.db)
    history = History(rows)
    done = store_runs(store)
    started = time.monotonic()
    for k in range(args.runs):
        report = history.run(k)
        if k < done:
            continue
        store.ingest(report, label=f"bench {k}")
        if k % 50 == 0:
            print(f"run {k}: {time.monotonic() - started:.0f} s", flush=True)
    print(f"built {args.runs} runs of {len(rows)} pairs in {time.monotonic() - started:.0f} s", flush=True)


def store_runs(store) -> int:
    from sqlalchemy import func, select

    from e2e.service import schema

    with store.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(schema.runs)).scalar()


def percentiles(seconds: list[float]) -> dict:
    ms = sorted(1000 * s for s in seconds)
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1), "n": len(ms)}


def measure(args, rows: list[dict]) -> dict:
    import httpx

    from e2e.service import queries
    from e2e.service.reports import pack
    from e2e.service.store import Store
    from tests.servers import Service

    db_files = [Path(args.db + suffix) for suffix in ("", "-wal", "-shm")] if "://" not in args.db else []
    size = sum(p.stat().st_size for p in db_files if p.exists())
    server = Service(args.db, "bench-token", Path(args.log))
    figures: dict = {"db": args.db if "://" in args.db else "sqlite", "db_bytes": size}
    try:
        client = httpx.Client(base_url=server.url, timeout=120)
        random_ = random.Random(1)
        total = client.get("/api/runs", params={"limit": 1}).json()["total"]
        figures["runs"] = total
        bug_total = client.get("/api/bugs", params={"limit": 1}).json()["total"]
        figures["bugs"] = bug_total
        store = Store(args.db)
        bug_ids = [b["id"] for b in queries.bugs(store, limit=5000)["bugs"]]
        timings: dict[str, list[float]] = {
            "bug list page": [],
            "bug list API": [],
            "bug page": [],
            "pair history page": [],
        }
        for _ in range(args.requests):
            for name, url in (
                ("bug list page", "/"),
                ("bug list API", "/api/bugs?status=open&limit=100"),
                ("bug page", f"/bugs/{random_.choice(bug_ids)}"),
                ("pair history page", "/pair"),
            ):
                params = None
                if name == "pair history page":
                    row = random_.choice(rows)
                    params = {"test": row["test"], "config": row["config"]}
                begun = time.perf_counter()
                answer = client.get(url, params=params)
                timings[name].append(time.perf_counter() - begun)
                assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
        figures["requests"] = {name: percentiles(values) for name, values in timings.items()}
        report = History(rows, seed=99).run(total + 1, run_id=f"measure-{time.time()}")
        data = pack(report)
        begun = time.perf_counter()
        answer = client.post("/api/runs", content=data, headers={"Authorization": "Bearer bench-token"})
        figures["ingest_upload_s"] = round(time.perf_counter() - begun, 3)
        assert answer.status_code == 201, answer.text
        figures["ingest_server_s"] = answer.json()["seconds"]
        figures["upload_bytes"] = len(data)
        report = History(rows, seed=98).run(total + 2, run_id=f"measure-store-{time.time()}")
        begun = time.perf_counter()
        store.ingest(report)
        figures["ingest_store_s"] = round(time.perf_counter() - begun, 3)
    finally:
        server.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", required=True, help="a reports directory of a real run (repeat)")
    parser.add_argument("--db", default="/tmp/service-bench.db")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--log", default="/tmp/service-bench.log")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--measure-only", action="store_true")
    args = parser.parse_args()
    memoize_failures()
    rows = source_rows(args.source, args.pairs)
    print(
        f"{len(rows)} pairs from {', '.join(args.source)}: {sum(r['outcome'] != 'pass' for r in rows)} not passing",
        flush=True,
    )
    if not args.measure_only:
        build(args, rows)
    if not args.build_only:
        print(json.dumps(measure(args, rows), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
