"""`python -m e2e.tools.diff`: what changed between two runs, per config, on synthetic results."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.tools.diff import compare, format_table, main


def row(test, outcome="pass", final=None, signature=None, config="linalg", duration=0.5, **extra) -> dict:
    final = final or {"pass": "passed", "skip": "skipped"}.get(outcome, "failed")
    return {
        "test": test,
        "config": config,
        "outcome": outcome,
        "final": final,
        "signature": signature,
        "duration": duration,
        **extra,
    }


BASE = [
    row("A"),
    row("B", "fail", signature="backend | p1 | x"),
    row("C", "fail", "xfailed", "backend | p1 | message one"),
    row("D", "fail", "xfailed", "backend | p1 | m"),
    row("E", "fail", signature="backend | p1 | m"),
    row("F"),
    row("G", duration=1.0),
    row("H", duration=0.1),
    row("I", duration=2.0),
    row("J"),
    row("M"),
    row("O", duration=1.0),
    row("N", config="tosa"),
    row("P", "crash", signature="crash | lower | Segmentation fault", config="tosa"),
]
NEW = [
    row("A", "fail", signature="compare | values"),  # newly failing
    row("B"),  # newly passing
    row("C", "fail", "xfailed", "backend | p1 | message two"),  # same key: no change
    row("D", "fail", signature="lower | p2 | m"),  # another key, and now unexpected
    row("E", "fail", signature="backend | p2 | m"),  # another key, failing unexpectedly before too
    row("F", "skip"),  # other change
    row("G", duration=3.0),  # slower
    row("H", duration=0.5),  # 5x, but under --min-seconds
    row("I", duration=3.0),  # 1.5x
    row("K"),  # added
    row("L", "fail", signature="backend | p | x"),  # added, failing
    row("M", "fail", "xfailed", "backend | p | x"),  # passed; an xfail entry now expects a failure
    row("O", duration=5.0, cached=True),  # from the result cache: not timed
    row("N", config="tosa"),
    row("P", "crash", signature="crash | lower | Aborted", config="tosa"),  # same key
]


def kinds(diff) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for change in diff.changes:
        found.setdefault(change.kind, set()).add(f"{change.test}/{change.config}")
    return found


def test_each_kind_of_change_is_found_and_only_new_failures_count():
    diff = compare(BASE, NEW, time_factor=2.0, min_seconds=1.0)
    assert kinds(diff) == {
        "newly failing": {"A/linalg", "M/linalg"},
        "newly passing": {"B/linalg"},
        "other signature": {"D/linalg", "E/linalg"},
        "other change": {"F/linalg"},
        "slower": {"G/linalg"},
        "added": {"K/linalg", "L/linalg"},
        "removed": {"J/linalg"},
    }
    assert {f"{c.test}/{c.kind}" for c in diff.new_failures} == {
        "A/newly failing",
        "M/newly failing",
        "D/other signature",
        "L/added",
    }
    assert (diff.base_pairs["linalg"], diff.new_pairs["linalg"], diff.new_pairs["tosa"]) == (12, 13, 2)


def test_the_time_factor_and_floor_are_options():
    diff = compare(BASE, NEW, time_factor=1.4, min_seconds=0.2)
    assert {c.test for c in diff.of("slower")} == {"G", "H", "I"}


def test_the_table_counts_each_kind_per_config():
    lines = format_table(compare(BASE, NEW)).splitlines()
    assert lines[0].split() == [
        "config", "base", "new", "newly", "failing", "newly", "passing", "other", "signature", "other", "change",
        "added", "removed", "slower",
    ]  # fmt: skip
    assert lines[1].split() == ["linalg", "12", "13", "2", "1", "2", "1", "2", "1", "1"]
    assert lines[2].split() == ["tosa", "2", "2", ".", ".", ".", ".", ".", ".", "."]
    assert lines[3].split() == ["all", "14", "15", "2", "1", "2", "1", "2", "1", "1"]


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows) if path.suffix == ".json" else "".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_command_exits_1_on_a_new_failure_and_writes_the_html(tmp_path, capsys):
    base = write(tmp_path / "base" / "results.json", BASE)
    new = write(tmp_path / "new" / "results.jsonl", NEW)  # a run that was killed: its jsonl
    assert main([str(base.parent), str(new.parent), "--html", str(tmp_path / "diff.html")]) == 1
    out = capsys.readouterr().out
    assert "10 pairs changed; 4 new failures" in out
    assert "         linalg  A: passed -> failed (fail: compare | values)" in out
    assert "D: xfailed (fail: backend | p1) -> failed (fail: lower | p2)  NEW FAILURE" in out
    page = (tmp_path / "diff.html").read_text()
    assert '<section data-kind="newly failing"><h2>newly failing (2)</h2>' in page
    assert page.count("<tr class=new-failure>") == 4 and "4 new failures" in page


def test_no_new_failure_exits_0_even_with_changes(tmp_path, capsys):
    keep = {"B", "C", "E", "G", "J", "K", "N"}
    base = write(tmp_path / "base.json", [r for r in BASE if r["test"] in keep])
    new = write(tmp_path / "new.json", [r for r in NEW if r["test"] in keep])
    assert main([str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "5 pairs changed; no new failure" in out  # B fixed, E another key, G slower, J removed, K added


def test_a_path_without_results_is_an_error_not_a_diff(tmp_path, capsys):
    base = write(tmp_path / "base.json", BASE)
    (tmp_path / "empty").mkdir()
    assert main([str(base), str(tmp_path / "empty")]) == 2
    assert "no results.json or results.jsonl in this directory" in capsys.readouterr().err
    (tmp_path / "other.json").write_text(json.dumps([{"name": "x"}]))
    assert main([str(base), str(tmp_path / "other.json")]) == 2
    assert "has no test or config" in capsys.readouterr().err
