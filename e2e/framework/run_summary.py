"""Reading results: the failure text of one pair, and the summary of a run."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from e2e.framework.result import PASS, Result


def failure_text(result: Result, rerun: str) -> str:
    lines = [
        f"{result.test} on {result.config}: {result.outcome} in stage `{result.stage}`",
        f"signature: {result.signature}",
        "",
        result.error.rstrip(),
        "",
    ]
    lines += [f"note: {note}" for note in result.notes]
    if result.ir_path:
        lines.append(f"IR given to the failing stage: {result.ir_path}")
    if result.repro_path:
        lines.append(f"reproducer: {result.repro_path}/README.md")
    lines.append(f"rerun: {rerun}")
    return "\n".join(lines)


def header_lines(meta: dict, suites: list[Path], reports_dir: Path) -> list[str]:
    """The report header: what compiler is under test, and where things go."""
    cap = meta["memory_cap_gib"]
    memory = f"{cap:.1f} GiB" if cap else "no memory cap"
    return [
        f"e2e: torch {meta['torch']}",
        f"e2e: torch-mlir {meta['torch_mlir']}",
        f"e2e: platform {meta['platform']} on {meta['cpu']} (golden values from torch's {meta['platform']} kernels; "
        f"xfail entries marked @<platform> hold only there); compiled for {meta['jit_target']} "
        f"(E2E_JIT_TARGET / --jit-target)",
        f"e2e: suites {', '.join(str(s) for s in suites)}; configs {', '.join(meta['configs'])}; "
        f"shapes {meta['shape_mode']}; budget {meta['budget_s']:.0f} s and "
        f"{memory} per pair; "
        f"reports in {reports_dir}",
    ]


def summarize(rows: list[dict]) -> str:
    """Per config: counts by final outcome, and the most common failing stages."""
    by_config: dict[str, Counter] = defaultdict(Counter)
    stages: dict[str, Counter] = defaultdict(Counter)
    cached: Counter = Counter()
    for row in rows:
        by_config[row["config"]][row["final"]] += 1
        cached[row["config"]] += bool(row.get("cached"))
        if row["final"] not in ("passed", "xpassed") and row.get("stage"):
            stages[row["config"]][row["stage"]] += 1
    lines = []
    once = hung_once(rows)
    for config in sorted(by_config):
        counts = by_config[config]
        total = sum(counts.values())
        parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        top = ", ".join(f"{s} {n}" for s, n in stages[config].most_common(4))
        reused = f" ({cached[config]} from the result cache)" if cached[config] else ""
        lines.append(f"{config:>10}: {total} run{reused}: {parts}" + (f"  [failing stages: {top}]" if top else ""))
    if once["pairs"]:
        lines.append(
            f"{once['passed_on_rerun']} pairs hung once and passed on rerun"
            + (f" ({once['pairs']} hung once in all)" if once["pairs"] != once["passed_on_rerun"] else "")
            + ": "
            + "; ".join(once["which"])
        )
    return "\n".join(lines)


def hung_once(rows: list[dict]) -> dict:
    """The pairs of this run whose first attempt timed out and whose rerun in a fresh test
    host decided their result (`Result.hung_first`), for run.json and the summary: a hang
    that a rerun passed is counted, not hidden."""
    pairs = [row for row in rows if row.get("hung_first") and not row.get("cached")]
    return {
        "pairs": len(pairs),
        "passed_on_rerun": sum(row["outcome"] == PASS for row in pairs),
        "which": [
            f"{row['test']}::{row['config']} (hung in {row['hung_first']}, rerun: {row['outcome']})" for row in pairs
        ],
    }
