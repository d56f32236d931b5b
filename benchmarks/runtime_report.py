"""The runtime configs beside their RefBackend twins, from a run's reports directory.

    python -m pytest e2e --config tosa,stablehlo,linalg,tosa@tosa-ref,stablehlo@xla,linalg@iree -n 2
    python benchmarks/runtime_report.py reports [--examples 3]

For each runtime config (`<backend>@<executor>`) in the run, and its twin when the run
has it: pairs, passed, failed by stage, the median pair time; the verdicts the runtime
pairs carry (`agree`, `runtime-side`, `RefBackend-side`, `both wrong`: see
`e2e.configs.runtime`); and the pairs where one fails and the other passes, grouped by
signature: failures only the runtime shows (a runtime's limit or bug, or torch-mlir
output the runtime refuses) and failures only the RefBackend shows. Outcomes are the
pairs' own (`fail` whether or not an xfail set expects it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.suite_report import load  # noqa: E402
from e2e.configs.runtime import CONFIGS  # noqa: E402
from e2e.framework.html_report import runtime_verdicts  # noqa: E402
from e2e.framework.result import VERDICT_KINDS  # noqa: E402
from e2e.framework.results_files import row_signature  # noqa: E402
from e2e.framework.signature import Signature  # noqa: E402


def summary(rows: list[dict]) -> str:
    outcomes = Counter(row["outcome"] for row in rows)
    stages = Counter(row.get("stage") or "?" for row in rows if row["outcome"] != "pass")
    median = statistics.median(row.get("duration", 0.0) for row in rows) if rows else 0.0
    failed = ", ".join(f"{stage} {n}" for stage, n in stages.most_common())
    return (
        f"{len(rows)} pairs, {outcomes['pass']} pass, {len(rows) - outcomes['pass']} not "
        f"({failed or 'none'}); median pair {1000 * median:.0f} ms"
    )


def signature_of(row: dict) -> str:
    """The failure's signature with its message cut short."""
    parsed = row_signature(row) or Signature(str(row.get("stage")), row["outcome"])
    return Signature(parsed.stage, parsed.where, parsed.message and parsed.message[:150]).format()


def only_one_fails(mine: dict, twin: dict) -> tuple[dict, dict]:
    """(signature -> tests failing only on the runtime, signature -> tests failing only on the twin)."""
    runtime_only: dict[str, list[str]] = defaultdict(list)
    twin_only: dict[str, list[str]] = defaultdict(list)
    for test, row in mine.items():
        other = twin.get(test)
        if other is None:
            continue
        if row["outcome"] != "pass" and other["outcome"] == "pass":
            runtime_only[signature_of(row)].append(test)
        elif row["outcome"] == "pass" and other["outcome"] != "pass":
            twin_only[signature_of(other)].append(test)
    return runtime_only, twin_only


def siblings(name: str, configs) -> list[str]:
    """The other configs of runtime config `name`'s backend among `configs`: its twin and the
    runtimes that share the twin (`stablehlo@interp`: `stablehlo`, `stablehlo@xla`)."""
    backend = CONFIGS[name].twin
    return sorted(c for c in configs if c != name and (c == backend or (c in CONFIGS and CONFIGS[c].twin == backend)))


def only_this_fails(name: str, by_config: dict[str, dict[str, dict]]) -> dict[str, list[str]]:
    """signature -> tests that fail on runtime config `name` and pass on every sibling in
    the run (when it has two or more): what this executor alone gets wrong, or refuses."""
    others = siblings(name, by_config)
    if len(others) < 2:
        return {}
    alone: dict[str, list[str]] = defaultdict(list)
    for test, row in by_config[name].items():
        rows = [by_config[c].get(test) for c in others]
        if row["outcome"] != "pass" and all(other and other["outcome"] == "pass" for other in rows):
            alone[signature_of(row)].append(test)
    return alone


def grouped(title: str, groups: dict[str, list[str]], examples: int) -> list[str]:
    total = sum(len(tests) for tests in groups.values())
    lines = [f"  {title}: {total} tests, {len(groups)} signatures"]
    for signature, tests in sorted(groups.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(sorted(tests)[:examples]) + (", ..." if len(tests) > examples else "")
        lines.append(f"    {len(tests):4d}  {signature}\n          {shown}")
    return lines


def report(rows: list[dict], examples: int) -> list[str]:
    by_config: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        by_config[row["config"]][row["test"]] = row
    verdicts = runtime_verdicts(rows)
    lines = []
    for name in sorted(c for c in by_config if c in CONFIGS):
        twin_name = CONFIGS[name].twin
        mine, twin = by_config[name], by_config.get(twin_name, {})
        lines.append(f"== {name}: {summary(list(mine.values()))}")
        if twin:
            lines.append(f"   {twin_name} (twin): {summary(list(twin.values()))}")
        counts = verdicts.get(name, {}).get("counts", Counter())
        lines.append("   verdicts: " + ", ".join(f"{k} {counts[k]}" for k in ("agree", *VERDICT_KINDS)))
        if twin:
            runtime_only, twin_only = only_one_fails(mine, twin)
            lines += grouped(f"fail only on {name}", runtime_only, examples)
            lines += grouped(f"fail only on {twin_name}", twin_only, examples)
        if alone := only_this_fails(name, by_config):
            lines += grouped(f"fail only on {name} (pass on {', '.join(siblings(name, by_config))})", alone, examples)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", type=Path, nargs="+", help="reports directories (their rows are joined)")
    parser.add_argument("--examples", type=int, default=3, help="tests named per signature")
    args = parser.parse_args()
    rows = [row for reports in args.reports for row in load(reports)[1]]
    print("\n".join(report(rows, args.examples)))


if __name__ == "__main__":
    main()
