"""The StableHLO testdata suite's numbers: programs taken and skipped, and a run's results.

python -m e2e.stablehlo_testdata --report [--dir DIR]            # programs, skips by reason, checks
python -m e2e.stablehlo_testdata --summary reports/results.json   # per config: outcomes, stages, signatures, op families
python -m e2e.stablehlo_testdata --table reports/                 # op family x config, as a Markdown table
python -m e2e.stablehlo_testdata --explain reports/ [--testdata-results TD]   # the stablehlo config's failures

The results may be a reports directory, a `results.json` or the `results.jsonl` of a run
still going (`e2e.framework.results_files.load_rows`).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from e2e.framework.results_files import load_rows
from e2e.stablehlo_testdata.families import family, family_counts
from e2e.stablehlo_testdata.register import CI_EVERY, PREFIX, corpus_dir, program_paths


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


def testdata_rows(results: Path) -> list[dict]:
    return [row for row in load_rows(results)[0] if row["test"].startswith(PREFIX)]


def run_summary(results: Path, top: int = 12) -> list[str]:
    rows = testdata_rows(results)
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


def family_table(rows: list[dict]) -> list[str]:
    """Op family x config as Markdown: per cell `pass/ran` (ran: not skipped); families by
    program count, then name; a last row of totals (`families.family_counts`)."""
    counts = family_counts(rows)
    lines = [
        "| family | programs | " + " | ".join(f"`{c}`" for c in counts.configs) + " |",
        "|---|---:|" + "---:|" * len(counts.configs),
    ]
    lines += [f"| {name} | {programs} | " + " | ".join(cells) + " |" for name, programs, cells in counts.rows]
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true", help="programs taken, skips by reason, checks")
    parser.add_argument("--dir", help="the corpus (default: $STABLEHLO_TESTDATA, else the shared copy)")
    parser.add_argument("--summary", metavar="RESULTS", help="a run's results: per config outcomes and failures")
    parser.add_argument("--table", metavar="RESULTS", help="a run's results: op family x config, pass/ran (Markdown)")
    parser.add_argument(
        "--explain",
        metavar="RESULTS",
        help="a run's results: which failing pairs of the stablehlo config a StableHLO -> linalg bug "
        "shown alone by the testdata explains",
    )
    parser.add_argument(
        "--testdata-results",
        metavar="TD_RESULTS",
        help="with --explain: a testdata run's results, for the testdata configs' verdicts (default: their xfail sets)",
    )
    args = parser.parse_args(argv)
    if not (args.report or args.summary or args.table or args.explain):
        parser.print_help()
        return 2
    root = Path(args.dir) if args.dir else corpus_dir()
    if (args.report or args.explain) and root is None:
        print("no StableHLO testdata: pass --dir DIR or set $STABLEHLO_TESTDATA", file=sys.stderr)
        return 2
    if args.report:
        print("\n".join(program_report(root)))
    if args.summary:
        print("\n".join(run_summary(Path(args.summary))))
    if args.table:
        print("\n".join(family_table(testdata_rows(Path(args.table)))))
    if args.explain:
        print("\n".join(explain(Path(args.explain), root, args.testdata_results)))
    return 0


def explain(results: Path, root: Path, testdata_results: str | None) -> list[str]:
    from e2e.stablehlo_testdata import explain as testdata

    rows = testdata_rows(Path(testdata_results)) if testdata_results else None
    lowered = testdata.testdata_verdicts(testdata.LOWERED, rows, f"results {testdata_results}")
    reference = testdata.testdata_verdicts(testdata.REFERENCE, rows, f"results {testdata_results}")
    index = testdata.isolated_failures(root, lowered, reference)
    explanations = testdata.explain_run(results, index, load_rows(results)[0])
    return testdata.explanation_lines(explanations, index, lowered, reference)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
