"""Rewrite the xfail sets from the results of a run.

    python -m e2e.configs.update_xfails [reports/results.json] [--xfail-dir DIR]

The results may be a reports directory, and may be merged from shards (`python -m
e2e.tools.merge`): a row that carries its own `platform` (a merged row does: its shard's) is
judged for that platform.

For every config and shape mode in the results: a test that failed (unexpectedly, as
expected, or differently) is listed with `<outcome>: <signature>`, which the plugin then
checks; a test that passed is removed. A reason written by hand (one that records no
signature) and a note beside a grouped name are kept. Tests broken on native torch
(stage `golden`), skipped pairs and tests not in the run keep their lines or stay out,
so a partial run (`-k tosa`) only touches what it ran. Every line carries its reason.
Entries marked `@<platform>` are judged only by results of that platform.

An xfail entry names a failure outside this project (docs/xfails.md): a failure raised in
this project's own code (`own_code`: the innermost frame of its traceback in
`compiler/frontends/` or `e2e/`, or a Python pass of either) is refused, never filed: it
is printed with where it was raised, and the test's line is left as it was (a test not
listed stays failing). `--check` writes nothing: it prints what the results and the
existing sets hold of such failures, and exits 1 if any.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

from e2e.configs import XFAIL_DIR
from e2e.configs.xfails import OUTCOMES, XfailEntry, format_xfails, read_xfails, xfail_path
from e2e.framework.results_files import load_rows, results_file, row_signature
from e2e.framework.signature import Signature


def update(results_path: Path, directory: Path = XFAIL_DIR, platform: str | None = None) -> dict[Path, tuple[int, int]]:
    """Rewrite the files the results touch; (added, removed) per file.

    A row's platform is its own `platform` (merged shards' rows carry it), else the run's
    (from `run.json` beside them, else this machine's): entries marked for other platforms
    are kept as they are; an entry marked for this one loses it when the test passed here.
    """
    rows, _ = load_rows(results_path)
    platform = platform or _run_platform(results_file(results_path))
    refused = own_code_failures(rows)
    for row, why in refused:
        print(f"update_xfails: refused: {row['test']} on {row['config']}: {why}", file=sys.stderr)
    rows = [row for row in rows if not any(row is other for other, _ in refused)]
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
        observed = row_signature(row)
        same = next(
            (
                e
                for e in elsewhere
                if e.expected is not None and observed is not None and e.expected[1].covers(observed)
            ),
            None,
        )
        if same is not None:
            return [e for e in entries if e is not same] + [replace(same, platforms=same.platforms | {platform})]
        return entries + [XfailEntry(name, reason, Path(), 0, platforms=frozenset({platform}))]
    return entries + [XfailEntry(name, reason, Path(), 0)]


# The innermost frame of a Python traceback, as `traceback` writes it.
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# This project's own code, where a failure is this project's to fix: its frontends and its
# framework; not the tests' bodies (`e2e/test_suite/`, an OpInfo sample's call in
# `e2e/opinfo/collect.py`, a generated program's module: an exception there is raised by the
# torch op the test calls, or is the test's own) nor the runtimes' wrappers
# (`compiler/executors/`, which report their runtime's errors).
_TEST_BODIES = r"test_suite/|opinfo/collect\.py$|generate/program\.py$"
_OWN_CODE = re.compile(rf"(?:^|/)((?:compiler/frontends|e2e)/(?!{_TEST_BODIES})[\w/]+\.py)$")
_OWN_PASSES = ("python:compiler.frontends.", "python:e2e.")


def own_code(signature: Signature | None, error: str = "") -> str | None:
    """Where a failure was raised in this project's own code, or None: a Python pass of
    its frontends or framework, or a traceback (in `error`) whose innermost frame is there
    (the exception raised there, or by a function of torch's C++ it called directly)."""
    where = (signature.where if signature is not None else None) or ""
    if where.startswith(_OWN_PASSES):
        return f"failed in this project's Python pass {where}"
    frames = _FRAME.findall(error or "")
    if frames and "site-packages" not in frames[-1][0] and (match := _OWN_CODE.search(frames[-1][0])):
        return f"raised in this project's {match[1]}:{frames[-1][1]}"
    return None


def own_code_failures(rows: list[dict]) -> list[tuple[dict, str]]:
    """The failed rows whose failure was raised in this project's own code, with where."""
    found = []
    for row in rows:
        if row["outcome"] in OUTCOMES and row.get("stage") != "golden":
            why = own_code(row_signature(row), row.get("error") or "")
            if why is not None:
                found.append((row, why))
    return found


def check(results_path: Path | None, directory: Path) -> list[str]:
    """What the results and the sets in `directory` (and below) hold of failures of this
    project's own code, one line each; nothing is written."""
    lines = []
    if results_path is not None:
        rows, _ = load_rows(results_path)
        for row, why in own_code_failures(rows):
            lines.append(f"{row['test']} on {row['config']} ({row['outcome']}): {why}")
    for path in sorted(directory.rglob("*.txt")):
        for entry in read_xfails(path, None):
            expected = entry.expected
            why = own_code(expected[1]) if expected else None
            if why is not None:
                lines.append(f"{entry.where}: {entry.label}: {why}")
    return lines


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
    parser.add_argument(
        "--check", action="store_true", help="write nothing; list failures of this project's own code (exit 1 if any)"
    )
    args = parser.parse_args(argv)
    results = Path(args.results)
    if args.check:
        flagged = check(results if results.exists() else None, Path(args.xfail_dir))
        print("\n".join(flagged) or "no failure of this project's own code")
        return 1 if flagged else 0
    if not results.exists():
        print(f"{results} not found: run the suite first (pytest e2e writes it)", file=sys.stderr)
        return 2
    for path, (added, removed) in update(results, Path(args.xfail_dir)).items():
        print(f"{path}: +{added} -{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
