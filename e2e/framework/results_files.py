"""Reading the results of a run, whichever form they are in.

A run's results are its reports directory (`results.json` once it ended, else the rows
`results.jsonl` had by then), a `results.json` (a list of rows, or `{"run": ..., "rows":
...}`) or a `results.jsonl` (a row a line). `load_rows(path)` takes any of these and
returns the rows with the run's metadata (`run.json` beside them, when there is one).
Shards, merging and diffing all read results through it. A row is the file's text
(`Result.to_json`); `row_signature(row)` reads its signature back as a value.
"""

from __future__ import annotations

import json
from pathlib import Path

from e2e.framework.html_report import load_results
from e2e.framework.signature import Signature

REQUIRED = ("test", "config")


class ResultsError(ValueError):
    """A path that holds no results, or rows that are not e2e results."""


def results_file(path: Path | str) -> Path:
    """The results file `path` names: itself, or in a reports directory `results.json`
    (the run ended) else `results.jsonl` (a run that was killed, or is still going)."""
    path = Path(path)
    if path.is_dir():
        for name in ("results.json", "results.jsonl"):
            if (path / name).is_file():
                return path / name
        raise ResultsError(f"{path}: no results.json or results.jsonl in this directory; is it a reports directory?")
    if not path.is_file():
        raise ResultsError(f"{path}: no such file or directory")
    return path


def load_rows(path: Path | str) -> tuple[list[dict], dict]:
    """The rows of the results at `path` and the run's metadata ({} when none is beside them)."""
    file = results_file(path)
    try:
        if file.suffix == ".jsonl":
            rows = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
            run: dict = {}
        else:
            rows, run = load_results(file)
    except ValueError as error:
        raise ResultsError(f"{file}: not an e2e results file ({error})") from None
    bad = next(
        (i for i, row in enumerate(rows) if not isinstance(row, dict) or not all(k in row for k in REQUIRED)), None
    )
    if bad is not None:
        raise ResultsError(f"{file}: row {bad} has no test or config; is this an e2e results file?")
    beside = file.with_name("run.json")
    if not run and beside.is_file():
        try:
            run = json.loads(beside.read_text())
        except ValueError:
            run = {}
    return rows, run


def pair(row: dict) -> tuple[str, str]:
    """A row's pair: (test, config)."""
    return row["test"], row["config"]


def row_signature(row: dict) -> Signature | None:
    """The signature a row records (its text read back: `Signature.parse`), or None."""
    text = row.get("signature")
    return Signature.parse(text) if text else None
