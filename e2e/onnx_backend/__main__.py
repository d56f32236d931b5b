"""The ONNX backend suite's numbers: cases taken and skipped, and a run's results.

python -m e2e.onnx_backend --report                        # cases by kind, skips by reason
python -m e2e.onnx_backend --summary reports/results.json  # a run: passed, failed by stage and signature
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def case_report() -> tuple[list[str], Counter]:
    from e2e.onnx_backend.cases import all_cases

    cases = all_cases()
    kinds = Counter(case.kind for case in cases)
    skipped = Counter(case.skip_reason for case in cases if case.skip_reason)
    lines = [f"collected {len(cases)} cases: " + ", ".join(f"{kind} {n}" for kind, n in kinds.items())]
    lines.append(f"runnable {len(cases) - sum(skipped.values())}, skipped {sum(skipped.values())}:")
    lines += [f"  {n:5d}  {reason}" for reason, n in skipped.most_common()]
    return lines, skipped


def run_summary(results: Path, top: int = 15) -> list[str]:
    rows = [row for row in json.loads(results.read_text()) if "/" in row["test"]]
    outcomes = Counter(row["outcome"] for row in rows)
    failed = [row for row in rows if row["outcome"] not in ("pass", "skip")]
    by_kind: dict[str, Counter] = {}
    for row in rows:
        by_kind.setdefault(row["test"].split("/")[0], Counter())[row["outcome"]] += 1
    lines = [f"ran {len(rows)} pairs: " + ", ".join(f"{outcome} {n}" for outcome, n in outcomes.most_common())]
    lines += [f"  {kind}: " + ", ".join(f"{o} {n}" for o, n in c.most_common()) for kind, c in sorted(by_kind.items())]
    lines.append(
        "failed by stage: " + ", ".join(f"{s} {n}" for s, n in Counter(r["stage"] for r in failed).most_common())
    )
    lines.append(f"top {top} failure signatures:")
    signatures = Counter((row["signature"] or "")[:150] for row in failed)
    lines += [f"  {n:5d}  {signature}" for signature, n in signatures.most_common(top)]
    run = results.with_name("run.json")
    if run.exists():
        lines.append(f"wall time: {json.loads(run.read_text()).get('duration_s')} s")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true", help="cases taken, and skips by reason")
    parser.add_argument("--summary", metavar="RESULTS", help="a run's results.json: outcomes, stages, signatures")
    args = parser.parse_args(argv)
    if not (args.report or args.summary):
        parser.print_help()
        return 2
    if args.report:
        print("\n".join(case_report()[0]))
    if args.summary:
        print("\n".join(run_summary(Path(args.summary))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
