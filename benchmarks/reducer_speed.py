"""Reducer speed and yield over the failing pairs of a suite run.

    python -m pytest e2e -q --reports-dir reports       # reduces every unexpected failure
    python benchmarks/reducer_speed.py reports/results.json

Reads the `reducer:` note each failing pair carries: how many got a bundle, how many
re-verified in a fresh process, the median and max op count of repro.mlir, and the
median reduction time (a pair that shares an earlier bundle costs ~0 s and is left
out of the time median).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def main(path: str = "reports/results.json") -> None:
    rows = json.loads(Path(path).read_text())
    failing = [r for r in rows if r["final"] not in ("passed", "xpassed")]
    notes = {}
    for row in failing:
        line = next((n for n in row.get("notes", []) if n.startswith("reducer:")), None)
        notes[(row["test"], row["config"])] = line
    fields = [dict(re.findall(r"(\w+)=(\S+)", n)) for n in notes.values() if n and "bundle=" in n]
    own = [f for f in fields if f["shared"] == "False"]
    sizes = [int(f["ops_after"]) for f in own]
    times = [float(f["seconds"]) for f in own]
    reasons = [n for n in notes.values() if n and "no bundle" in n]
    print(f"failing pairs: {len(failing)} (reduced: {sum(1 for n in notes.values() if n)})")
    print(f"with a bundle: {len(fields)} ({len(own)} distinct bundles, {len(fields) - len(own)} shared)")
    print(f"re-verified: {sum(f['verified'] == 'True' for f in fields)}")
    if sizes:
        print(f"repro.mlir ops: median {statistics.median(sizes)}, max {max(sizes)}")
        print(f"reduction time per distinct bundle: median {statistics.median(times):.1f} s, max {max(times):.1f} s")
    for reason in sorted(set(reasons)):
        print(f"  {reason}")


if __name__ == "__main__":
    main(*sys.argv[1:])
