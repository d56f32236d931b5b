"""Reading results: the failure text of one pair, and the summary of a run."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from e2e.framework.result import Result


def failure_text(result: Result, nodeid: str) -> str:
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
    lines.append(f"rerun: pytest e2e -k '{result.test} and {result.config}'")
    return "\n".join(lines)


def summarize(rows: list[dict]) -> str:
    """Per config: counts by final outcome, and the most common failing stages."""
    by_config: dict[str, Counter] = defaultdict(Counter)
    stages: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        by_config[row["config"]][row["final"]] += 1
        if row["final"] not in ("passed", "xpassed") and row.get("stage"):
            stages[row["config"]][row["stage"]] += 1
    lines = []
    for config in sorted(by_config):
        counts = by_config[config]
        total = sum(counts.values())
        parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        top = ", ".join(f"{s} {n}" for s, n in stages[config].most_common(4))
        lines.append(f"{config:>10}: {total} run: {parts}" + (f"  [failing stages: {top}]" if top else ""))
    return "\n".join(lines)


def write_results(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["test"], r["config"]))
    path.write_text(json.dumps(rows, indent=1) + "\n")
