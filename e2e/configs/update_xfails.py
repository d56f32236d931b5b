"""Rewrite the xfail sets from the results of a run.

    python -m e2e.configs.update_xfails [reports/results.json] [--xfail-dir DIR]

For every config and shape mode in the results: a test that failed (unexpectedly, as
expected, or differently) is listed with `<outcome>: <signature>`, which the plugin then
checks; a test that passed is removed. A reason written by hand (one that records no
signature) and a note beside a grouped name are kept. Tests broken on native torch
(stage `golden`), skipped pairs and tests not in the run keep their lines or stay out,
so a partial run (`-k tosa`) only touches what it ran. Every line carries its reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from e2e.configs import XFAIL_DIR
from e2e.configs.xfails import OUTCOMES, format_xfails, load_xfails, xfail_path


def update(results_path: Path, directory: Path = XFAIL_DIR) -> dict[Path, tuple[int, int]]:
    """Rewrite the files the results touch; (added, removed) per file."""
    rows = json.loads(results_path.read_text())
    changes: dict[Path, tuple[int, int]] = {}
    for config, mode in sorted({(row["config"], row.get("shape_mode", "annotated")) for row in rows}):
        if config == "-":  # a test file that did not import: no config to expect it on
            continue
        old = load_xfails(config, None, directory, mode)
        reasons = {name: entry.reason for name, entry in old.items()}
        notes = {name: entry.note for name, entry in old.items() if entry.note}
        for row in rows:
            if (row["config"], row.get("shape_mode", "annotated")) != (config, mode):
                continue
            name = row["test"]
            if row["outcome"] == "pass":
                reasons.pop(name, None)
            elif row["outcome"] in OUTCOMES and row.get("stage") != "golden":
                entry = old.get(name)
                if entry is None or entry.expected is not None:  # keep a hand-written reason
                    reasons[name] = f"{row['outcome']}: {row['signature']}".replace("\n", " ")
        path = xfail_path(config, directory, mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_xfails(reasons, notes))
        changes[path] = (len(set(reasons) - set(old)), len(set(old) - set(reasons)))
    return changes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default="reports/results.json")
    parser.add_argument("--xfail-dir", default=str(XFAIL_DIR))
    args = parser.parse_args(argv)
    results = Path(args.results)
    if not results.exists():
        print(f"{results} not found: run the suite first (pytest e2e writes it)", file=sys.stderr)
        return 2
    for path, (added, removed) in update(results, Path(args.xfail_dir)).items():
        print(f"{path}: +{added} -{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
