"""Rewrite the xfail sets from the results of a run.

    python -m e2e.configs.update_xfails [reports/results.json]

For every config in the results: a test that failed (unexpectedly or as expected) is
listed with its reason (a reason written by hand is kept; a new entry gets the failure
signature), a test that passed is removed. Tests not in the run keep their lines, so
a partial run (`-k tosa`) only touches what it ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from e2e.configs import XFAIL_DIR, load_xfails, xfail_path


def update(results_path: Path, directory: Path = XFAIL_DIR) -> dict[str, tuple[int, int]]:
    rows = json.loads(results_path.read_text())
    changes: dict[str, tuple[int, int]] = {}
    for config in sorted({row["config"] for row in rows}):
        entries = {name: e.reason for name, e in load_xfails(config, None, directory).items()}
        before = set(entries)
        for row in rows:
            if row["config"] != config:
                continue
            if row["outcome"] == "pass":
                entries.pop(row["test"], None)
            elif row["test"] not in entries:
                entries[row["test"]] = f"{row['outcome']}: {row['signature']}".replace("\n", " ")
        lines = [f"{name}  # {entries[name]}" for name in sorted(entries)]
        path = xfail_path(config, directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines))
        changes[config] = (len(set(entries) - before), len(before - set(entries)))
    return changes


def main(argv: list[str]) -> int:
    results = Path(argv[0] if argv else "reports/results.json")
    if not results.exists():
        print(f"{results} not found: run the suite first (pytest e2e writes it)", file=sys.stderr)
        return 2
    for config, (added, removed) in update(results).items():
        print(f"{xfail_path(config)}: +{added} -{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
