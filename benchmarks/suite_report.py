"""Where a suite run's time and memory went, from its reports directory.

    python -m pytest e2e -n 2 --no-reduce            # or any suite run
    python benchmarks/suite_report.py reports [--upstream-seconds 1743]

Prints, for that one run: wall time, pairs and pairs per second (cached pairs counted
apart), time per stage summed over pairs and its median, the median pair per config,
the slowest pairs, each worker's time (before its first item, in items and their pairs,
after its last), peak RSS per worker and the largest child, and the ratio of the
wall time to a reference time (upstream torch-mlir's framework needs 583 + 628 + 532 =
1,743 s for its three FX configs over its own suite on this machine: pass that number
when the run was upstream's suite through linalg, tosa and stablehlo).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def load(reports: Path) -> tuple[dict, list[dict]]:
    run = json.loads((reports / "run.json").read_text())
    results = reports / "results.json"
    if results.exists():
        rows = json.loads(results.read_text())
    else:  # a run killed outright: the rows streamed so far
        rows = [json.loads(line) for line in (reports / "results.jsonl").read_text().splitlines()]
    return run, rows


def report(run: dict, rows: list[dict], upstream_seconds: float | None) -> list[str]:
    wall = run.get("duration_s", 0.0)
    fresh = [row for row in rows if not row.get("cached")]
    lines = [
        f"run {run.get('run_id')} ({run.get('status')}): {run.get('command', '')}",
        f"wall {wall:.0f} s; {len(rows)} pairs ({len(rows) - len(fresh)} from the result cache); "
        f"{len(rows) / wall:.2f} pairs/s"
        if wall
        else "no duration recorded",
    ]
    if upstream_seconds and wall:
        lines.append(
            f"vs reference {upstream_seconds:.0f} s: {wall / upstream_seconds:.2f}x the time "
            f"({upstream_seconds / wall:.1f}x faster)"
        )
    stage_total: dict[str, float] = defaultdict(float)
    stage_values: dict[str, list[float]] = defaultdict(list)
    for row in fresh:
        for stage, seconds in (row.get("stage_seconds") or {}).items():
            stage_total[stage] += seconds
            stage_values[stage].append(seconds)
    pair_seconds = sum(row.get("duration", 0.0) for row in fresh)
    if fresh:
        lines.append(
            f"pair-seconds {pair_seconds:.0f} (run pairs); time per stage, summed and median over the pairs that ran it:"
        )
        for stage, total in sorted(stage_total.items(), key=lambda item: -item[1]):
            median = statistics.median(stage_values[stage])
            lines.append(
                f"  {stage:>14}: {total:8.1f} s  {100 * total / max(pair_seconds, 1e-9):5.1f}%  median {1000 * median:6.0f} ms"
            )
        lines.append("  (the rest of a pair's time: forking, golden reuse, freeing its program, pickling, the reducer)")
        workers = max(len(run.get("peak_rss_mib") or {}), 1)
        lines.append(f"floor on {workers} worker(s), the pairs' time shared evenly: {pair_seconds / workers:.0f} s")
        from_cache: dict[str, int] = defaultdict(int)
        for row in fresh:
            for stage in row.get("stages_from_cache") or ():
                from_cache[stage] += 1
        if from_cache:
            lines.append(
                "stages the program cache answered (pairs): "
                + ", ".join(
                    f"{stage} {count}" for stage, count in sorted(from_cache.items(), key=lambda item: -item[1])
                )
            )
        by_config: dict[str, list[float]] = defaultdict(list)
        for row in fresh:
            by_config[row["config"]].append(row.get("duration", 0.0))
        lines.append(
            "median pair per config: "
            + ", ".join(
                f"{config} {1000 * statistics.median(values):.0f} ms" for config, values in sorted(by_config.items())
            )
        )
        slowest = sorted(fresh, key=lambda row: -row.get("duration", 0.0))[:8]
        lines.append(
            "slowest pairs: "
            + ", ".join(
                f"{row['test']}[{row['config']}] {row.get('duration', 0.0):.1f} s ({row['outcome']})" for row in slowest
            )
        )
        biggest = sorted(fresh, key=lambda row: -row.get("peak_rss_mib", 0.0))[:5]
        lines.append(
            "largest pairs (their test host's RSS during the pair): "
            + ", ".join(f"{row['test']}[{row['config']}] {row.get('peak_rss_mib', 0.0):.0f} MiB" for row in biggest)
        )
    lines += per_worker(
        "worker time (s): ",
        run.get("worker_seconds"),
        lambda c: (
            f"{c['before_first_item']:.1f} before its first item, {c['items']:.1f} in items "
            f"({c['pairs']:.1f} in pairs, {c['items'] - c['pairs']:.1f} the framework's: hosts, golden runs, "
            f"rows, reductions), {c['after_last_item']:.1f} after"
        ),
        "; ",
    )
    lines += per_worker(
        "peak RSS per worker: ",
        run.get("peak_rss_mib"),
        lambda p: (
            f"{p['worker']} MiB (largest child {p['largest_child']} MiB"
            + (
                f"; largest test host {p['largest_host']} MiB, {p['largest_host_test']})"
                if "largest_host" in p
                else ")"
            )
        ),
        ", ",
    )
    outcomes: dict[str, int] = defaultdict(int)
    for row in rows:
        outcomes[row["outcome"]] += 1
    lines.append("outcomes: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    return lines


def per_worker(label: str, by_worker: dict | None, text, separator: str) -> list[str]:
    """One line: `label`, then each worker's `text(value)` after its name; none without values."""
    if not by_worker:
        return []
    return [label + separator.join(f"{worker} {text(value)}" for worker, value in sorted(by_worker.items()))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="?", default="reports")
    parser.add_argument(
        "--upstream-seconds",
        type=float,
        default=None,
        help="reference wall time to compare with (1743 for upstream's suite on three FX configs)",
    )
    args = parser.parse_args()
    run, rows = load(Path(args.reports))
    print("\n".join(report(run, rows, args.upstream_seconds)))


if __name__ == "__main__":
    main()
