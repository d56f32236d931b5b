"""The StableHLO testdata suite's numbers: programs taken and skipped, and a run's results.

python -m e2e.stablehlo_testdata --report [--dir DIR]            # programs, skips by reason, checks
python -m e2e.stablehlo_testdata --summary reports/results.json   # per config: outcomes, stages, signatures, op families
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from e2e.stablehlo_testdata.register import CI_EVERY, PREFIX, corpus_dir, program_paths


def family(test: str) -> str:
    """The op family of a test name: the first word of the program's file name
    (`stablehlo/scatter_add_uint32_...` -> `scatter`), prefixed with its subdirectory."""
    path = test.removeprefix(PREFIX)
    directory, _, base = path.rpartition("/")
    word = base.split("_")[0]
    return f"{directory}/{word}" if directory else word


def program_report(root: Path) -> list[str]:
    from e2e.stablehlo_testdata.program import NotTaken, read_program

    paths = program_paths(root)
    skipped: Counter = Counter()
    checks: Counter = Counter()
    for path in paths:
        try:
            program = read_program(path, path.stem)
        except NotTaken as error:
            skipped[str(error)] += 1
            continue
        checks.update(check.kind for check in program.checks)
    lines = [f"{len(paths)} programs under {root}; CI slice (every {CI_EVERY}th): {len(paths[::CI_EVERY])}"]
    lines.append(f"taken {len(paths) - sum(skipped.values())}, skipped {sum(skipped.values())}:")
    lines += [f"  {n:5d}  {reason}" for reason, n in skipped.most_common()]
    lines.append("checks: " + ", ".join(f"{kind} {n}" for kind, n in checks.most_common()))
    return lines


def run_summary(results: Path, top: int = 12) -> list[str]:
    rows = [row for row in json.loads(results.read_text()) if row["test"].startswith(PREFIX)]
    lines = []
    for config in sorted({row["config"] for row in rows}):
        mine = [row for row in rows if row["config"] == config]
        outcomes = Counter(row["outcome"] for row in mine)
        failed = [row for row in mine if row["outcome"] not in ("pass", "skip")]
        lines.append(f"{config}: {len(mine)} pairs: " + ", ".join(f"{o} {n}" for o, n in outcomes.most_common()))
        lines.append(
            "  failed by stage: " + ", ".join(f"{s} {n}" for s, n in Counter(r["stage"] for r in failed).most_common())
        )
        lines.append(f"  top {top} signatures:")
        signatures = Counter((row["signature"] or "")[:140] for row in failed)
        lines += [f"    {n:4d}  {signature}" for signature, n in signatures.most_common(top)]
        by_family: dict[str, Counter] = {}
        for row in mine:
            by_family.setdefault(family(row["test"]), Counter())[row["outcome"]] += 1
        lines.append(
            "  by op family (pass/ran): "
            + ", ".join(f"{name} {c['pass']}/{sum(c.values()) - c['skip']}" for name, c in sorted(by_family.items()))
        )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true", help="programs taken, skips by reason, checks")
    parser.add_argument("--dir", help="the corpus (default: $STABLEHLO_TESTDATA, else the shared copy)")
    parser.add_argument("--summary", metavar="RESULTS", help="a run's results.json: per config outcomes and failures")
    args = parser.parse_args(argv)
    if not (args.report or args.summary):
        parser.print_help()
        return 2
    if args.report:
        root = Path(args.dir) if args.dir else corpus_dir()
        if root is None:
            print("no StableHLO testdata: pass --dir DIR or set $STABLEHLO_TESTDATA", file=sys.stderr)
            return 2
        print("\n".join(program_report(root)))
    if args.summary:
        print("\n".join(run_summary(Path(args.summary))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
