"""Rewrite the xfail sets from the results of a run.

    python -m e2e.configs.update_xfails [reports/results.json] [--xfail-dir DIR]

The results may be a reports directory, and may be merged from shards (`python -m
e2e.merge`): a row that carries its own `platform` (a merged row does: its shard's) is
judged for that platform.

For every config and shape mode in the results: a test that failed (unexpectedly, as
expected, or differently) is listed with `<outcome>: <signature>`, which the plugin then
checks; a test that passed is removed. A reason written by hand (one that records no
signature) and a note beside a grouped name are kept. Tests broken on native torch
(stage `golden`), skipped pairs and tests not in the run keep their lines or stay out,
so a partial run (`-k tosa`) only touches what it ran. Every line carries its reason.
Entries marked `@<platform>` are judged only by results of that platform.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from e2e.configs import XFAIL_DIR
from e2e.configs.xfails import OUTCOMES, XfailEntry, format_xfails, read_xfails, xfail_path
from e2e.framework.results_files import load_rows, results_file
from e2e.framework.signature import Signature


def update(results_path: Path, directory: Path = XFAIL_DIR, platform: str | None = None) -> dict[Path, tuple[int, int]]:
    """Rewrite the files the results touch; (added, removed) per file.

    A row's platform is its own `platform` (merged shards' rows carry it), else the run's
    (from `run.json` beside them, else this machine's): entries marked for other platforms
    are kept as they are; an entry marked for this one loses it when the test passed here.
    """
    rows, _ = load_rows(results_path)
    platform = platform or _run_platform(results_file(results_path))
    changes: dict[Path, tuple[int, int]] = {}
    for config, mode in sorted({(row["config"], row.get("shape_mode", "annotated")) for row in rows}):
        if config == "-":  # a test file that did not import: no config to expect it on
            continue
        path = xfail_path(config, directory, mode)
        old = read_xfails(path, None)
        entries = list(old)
        for row in rows:
            if (row["config"], row.get("shape_mode", "annotated")) == (config, mode):
                entries = _judge(entries, row, row.get("platform") or platform)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_xfails(entries))
        before, after = {e.label for e in old}, {e.label for e in entries}
        changes[path] = (len(after - before), len(before - after))
    return changes


def _judge(entries: list[XfailEntry], row: dict, platform: str) -> list[XfailEntry]:
    """The entries once one result of `platform` is taken into account."""
    name = row["test"]
    here = next((e for e in entries if e.test == name and e.holds_on(platform)), None)
    others = [e for e in entries if e is not here]
    if row["outcome"] == "pass":
        if here is not None and here.flaky:  # passing is one of its outcomes
            return entries
        if here is not None and here.platforms - {platform}:
            others.append(replace(here, platforms=here.platforms - {platform}))
        return others
    if row["outcome"] not in OUTCOMES or row.get("stage") == "golden":
        return entries
    reason = f"{row['outcome']}: {row['signature']}".replace("\n", " ")
    if here is not None:
        # A hand-written reason (no signature) stays; a recorded one is brought up to date.
        return others + [here if here.expected is None else replace(here, reason=reason)]
    elsewhere = [e for e in entries if e.test == name]
    if elsewhere:  # known to fail on other platforms only: now here too
        same = next(
            (
                e
                for e in elsewhere
                if Signature.parse(e.reason.partition(": ")[2]).covers(Signature.parse(row["signature"]))
            ),
            None,
        )
        if same is not None:
            return [e for e in entries if e is not same] + [replace(same, platforms=same.platforms | {platform})]
        return entries + [XfailEntry(name, reason, Path(), 0, platforms=frozenset({platform}))]
    return entries + [XfailEntry(name, reason, Path(), 0)]


def _run_platform(results_path: Path) -> str:
    try:
        return json.loads((results_path.parent / "run.json").read_text())["platform"]
    except (OSError, ValueError, KeyError):
        from e2e.framework.platform import torch_cpu_capability

        return torch_cpu_capability()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results", nargs="?", default="reports/results.json", help="results.json or a reports directory"
    )
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
