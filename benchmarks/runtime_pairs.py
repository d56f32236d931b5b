"""Runtime configs beside their RefBackend twins, from one run's results.

    python -m pytest e2e --config tosa,stablehlo,linalg,tosa@tosa-ref,stablehlo@xla,linalg@iree -n 2
    python benchmarks/runtime_pairs.py reports/results.json

Per runtime config: passed / failed by stage / skipped, beside its twin config when the
run has it; seconds per pair (mean, median) for both; the verdicts (which side of a
disagreement matches torch) grouped by side and by the runtime's signature.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

TWINS = {"tosa@tosa-ref": "tosa", "stablehlo@xla": "stablehlo", "linalg@iree": "linalg", "torch@iree": "linalg"}


def summary(rows: list[dict], config: str) -> str:
    mine = [r for r in rows if r["config"] == config]
    if not mine:
        return f"{config}: not in the run"
    outcomes = collections.Counter(r["outcome"] for r in mine)
    stages = collections.Counter(r["stage"] for r in mine if r["outcome"] not in ("pass", "skip"))
    seconds = [r["duration"] for r in mine]
    failing = ", ".join(f"{s} {n}" for s, n in stages.most_common())
    return (
        f"{config}: {len(mine)} pairs, {outcomes['pass']} passed, {len(mine) - outcomes['pass'] - outcomes['skip']} "
        f"failed ({failing}), {outcomes['skip']} skipped; {sum(seconds):.0f} pair-s, "
        f"mean {statistics.mean(seconds):.2f} s, median {statistics.median(seconds):.2f} s"
    )


def verdicts(rows: list[dict], config: str) -> dict[str, collections.Counter]:
    grouped: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        if row["config"] != config:
            continue
        for note in row["notes"]:
            if note.startswith("verdict: "):
                side = note[len("verdict: ") :].split(":")[0]
                grouped[side][row["signature"] or "-"] += 1
    return grouped


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--top", type=int, default=8, help="signatures shown per verdict side")
    args = parser.parse_args(argv)
    rows = json.loads(args.results.read_text())
    for config, twin in TWINS.items():
        if not any(r["config"] == config for r in rows):
            continue
        print(summary(rows, config))
        print("  twin " + summary(rows, twin))
        for side, signatures in sorted(verdicts(rows, config).items()):
            print(f"  verdict {side}: {sum(signatures.values())} pairs")
            for signature, count in signatures.most_common(args.top):
                print(f"    {count:4d}  {signature[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
