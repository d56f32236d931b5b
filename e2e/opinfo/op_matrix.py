"""Coverage of the OpInfo sweep after a run: ops x configs, pass or failing stage.

    python -m e2e.opinfo.op_matrix reports/results.json [--out reports/opinfo_coverage] [--print]

Writes `<out>.json` and `<out>.md` (a table: one row per op, one column per config,
`pass` when every sample of the op passed, else `<passed>/<samples> <most common failing
stage>`), and prints per config how many ops pass on every sample. Test names map
back to ops: `OpInfo_<op>[_int64|_bool]_<k>`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

NAME = re.compile(r"^OpInfo_(?P<op>.+?)(?:_(?P<dtype>int64|bool))?_(?P<sample>\d+)$")


def op_of(test: str) -> str | None:
    match = NAME.match(test)
    return match["op"] if match else None


def coverage(rows: list[dict]) -> dict:
    """{"configs", "ops": {op: {config: {passed, samples, stages}}}, "ops_passing_everywhere": {config: n}}."""
    cells: dict[str, dict[str, dict]] = defaultdict(dict)
    configs: set[str] = set()
    for row in rows:
        op = op_of(row["test"])
        if op is None:
            continue
        configs.add(row["config"])
        cell = cells[op].setdefault(row["config"], {"passed": 0, "samples": 0, "stages": Counter()})
        cell["samples"] += 1
        if row["outcome"] == "pass":
            cell["passed"] += 1
        else:
            cell["stages"][row.get("stage") or row["outcome"]] += 1
    ordered = sorted(configs)
    passing = {c: sum(1 for op in cells if _passes(cells[op].get(c))) for c in ordered}
    return {
        "configs": ordered,
        "ops": {
            op: {c: {**cell, "stages": dict(cell["stages"])} for c, cell in sorted(cells[op].items())}
            for op in sorted(cells)
        },
        "ops_passing_everywhere": passing,
        "ops_total": len(cells),
    }


def _passes(cell: dict | None) -> bool:
    return cell is not None and cell["passed"] == cell["samples"]


def cell_text(cell: dict | None) -> str:
    if cell is None:
        return "-"
    if _passes(cell):
        return "pass"
    stage = max(cell["stages"].items(), key=lambda kv: kv[1])[0]
    return f"{cell['passed']}/{cell['samples']} {stage}"


def table(report: dict) -> str:
    configs = report["configs"]
    width = max([len(op) for op in report["ops"]] + [2])
    lines = [
        f"| {'op':<{width}} | " + " | ".join(f"{c:<18}" for c in configs) + " |",
        f"|{'-' * (width + 2)}|" + "|".join("-" * 20 for _ in configs) + "|",
    ]
    for op, row in report["ops"].items():
        lines.append(f"| {op:<{width}} | " + " | ".join(f"{cell_text(row.get(c)):<18}" for c in configs) + " |")
    return "\n".join(lines)


def summary(report: dict) -> str:
    parts = [f"{c} {n}" for c, n in report["ops_passing_everywhere"].items()]
    return f"ops passing on every sample, of {report['ops_total']} swept: " + ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.opinfo.op_matrix", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, nargs="?", default=Path("reports/results.json"))
    parser.add_argument("--out", type=Path, default=Path("reports/opinfo_coverage"), help="writes OUT.json and OUT.md")
    parser.add_argument("--print", action="store_true", help="print the whole table")
    args = parser.parse_args(argv)
    if not args.results.exists():
        print(f"{args.results} not found: run the sweep first (see e2e/opinfo/__init__.py)", file=sys.stderr)
        return 2
    report = coverage(json.loads(args.results.read_text()))
    if not report["ops"]:
        print(f"{args.results} has no OpInfo_* tests", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(summary(report) + "\n\n" + table(report) + "\n")
    if args.print:
        print(table(report))
    print(summary(report))
    print(f"written: {args.out.with_suffix('.json')}, {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
