"""What changed between two runs, per config.

    python -m e2e.tools.diff BASE NEW [--html PATH] [--time-factor 2.0] [--min-seconds 1.0]

BASE and NEW are each a reports directory, a results.json or a results.jsonl. For each
config: pairs newly failing, newly passing, failing with another signature (their
signature *keys* differ: stage and pass, op or mismatch kind; see `Signature.key`), other
outcome changes (a pair now skipped, an xfail entry added or dropped), pairs added and
removed, and pairs whose duration grew past `--time-factor` (and to at least
`--min-seconds`; results reused from the result cache are not timed).

It prints a table and the changed pairs, writes an HTML page with `--html`, and exits 1
when there is a new failure: a pair that did not fail and now does (pass -> fail, even if
an xfail entry now expects it), or one that now fails unexpectedly and did not before
(an xfailed or passing pair, or a pair new in NEW, whose final outcome is `failed`);
else 0 (2: a path holds no results). The plugin's `--baseline DIR` prints the same
comparison at the end of a run, for the pairs that run ran.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from e2e.framework.results_files import ResultsError, load_rows, pair, results_file, row_signature

# Outcomes (before xfail sets) that are failures of the compiler or of the test.
FAILING = ("fail", "crash", "timeout", "memory", "error")
# What a pair can do between two runs, in the order the report lists them.
KINDS = {
    "newly failing": "did not fail in BASE, fails in NEW",
    "newly passing": "failed in BASE, passes in NEW",
    "other signature": "fails in both, with another signature key",
    "other change": "another change of outcome (skipped, an xfail entry added or dropped, ...)",
    "added": "in NEW only",
    "removed": "in BASE only",
    "slower": "took longer than time-factor x its BASE duration",
}
DEFAULT_TIME_FACTOR = 2.0
DEFAULT_MIN_SECONDS = 1.0


@dataclass
class Change:
    kind: str  # one of KINDS
    test: str
    config: str
    base: dict | None
    new: dict | None
    new_failure: bool = False  # counts toward the exit status

    def describe(self) -> str:
        """The change in a few words: outcomes and signatures, or durations."""
        if self.kind == "slower":
            return f"{_seconds(self.base)} -> {_seconds(self.new)}"
        before = _state(self.base) if self.base else "-"
        after = _state(self.new) if self.new else "-"
        return f"{before} -> {after}"


@dataclass
class Diff:
    changes: list[Change]
    base_pairs: Counter = field(default_factory=Counter)  # config -> pairs in BASE
    new_pairs: Counter = field(default_factory=Counter)
    time_factor: float = DEFAULT_TIME_FACTOR

    @property
    def new_failures(self) -> list[Change]:
        return [c for c in self.changes if c.new_failure]

    @property
    def configs(self) -> list[str]:
        return sorted(set(self.base_pairs) | set(self.new_pairs))

    def of(self, kind: str, config: str | None = None) -> list[Change]:
        return [c for c in self.changes if c.kind == kind and (config is None or c.config == config)]

    def by_pair(self) -> dict[tuple[str, str], list[str]]:
        """(test, config) -> what changed there ("newly failing: passed -> failed (...)"), for
        the pairs still in NEW: what the HTML report marks on its cells."""
        marks: dict[tuple[str, str], list[str]] = {}
        for change in self.changes:
            if change.new is not None:
                marks.setdefault((change.test, change.config), []).append(f"{change.kind}: {change.describe()}")
        return marks


def failing(row: dict) -> bool:
    return row.get("outcome") in FAILING


def signature_key(row: dict) -> str:
    signature = row_signature(row)
    return signature.key() if signature is not None else f"{row.get('outcome')} | {row.get('stage')}"


def _state(row: dict) -> str:
    final = row.get("final") or row.get("outcome", "?")
    if failing(row):
        return f"{final} ({row.get('outcome')}: {signature_key(row)})"
    return final


def _seconds(row: dict | None) -> str:
    return f"{float(row.get('duration') or 0.0):.1f} s" if row else "-"


def compare(
    base_rows: list[dict],
    new_rows: list[dict],
    time_factor: float = DEFAULT_TIME_FACTOR,
    min_seconds: float = DEFAULT_MIN_SECONDS,
) -> Diff:
    """The changes from `base_rows` to `new_rows` (a pair's last row counts)."""
    base = {pair(row): row for row in base_rows}
    new = {pair(row): row for row in new_rows}
    changes: list[Change] = []
    for key in sorted(set(base) | set(new)):
        test, config = key
        old, now = base.get(key), new.get(key)
        if old is None:
            changes.append(Change("added", test, config, None, now, new_failure=now.get("final") == "failed"))
            continue
        if now is None:
            changes.append(Change("removed", test, config, old, None))
            continue
        kind = _outcome_change(old, now)
        if kind is not None:
            unexpected = now.get("final") == "failed" and old.get("final") != "failed"
            changes.append(Change(kind, test, config, old, now, new_failure=kind == "newly failing" or unexpected))
        if _slower(old, now, time_factor, min_seconds):
            changes.append(Change("slower", test, config, old, now))
    return Diff(
        changes,
        Counter(config for _, config in base),
        Counter(config for _, config in new),
        time_factor,
    )


def _outcome_change(old: dict, now: dict) -> str | None:
    if not failing(old) and failing(now):
        return "newly failing"
    if failing(old) and now.get("outcome") == "pass":
        return "newly passing"
    if failing(old) and failing(now) and signature_key(old) != signature_key(now):
        return "other signature"
    if (old.get("outcome"), old.get("final")) != (now.get("outcome"), now.get("final")):
        return "other change"
    return None


def _slower(old: dict, now: dict, factor: float, min_seconds: float) -> bool:
    if old.get("cached") or now.get("cached"):
        return False
    before, after = float(old.get("duration") or 0.0), float(now.get("duration") or 0.0)
    return after >= min_seconds and after > factor * before


# --- terminal -----------------------------------------------------------------------------


def format_table(diff: Diff) -> str:
    """Per config: pairs in each run and the count of each kind of change."""
    kinds = list(KINDS)
    head = ["config", "base", "new", *kinds]
    rows = [
        [config, str(diff.base_pairs[config]), str(diff.new_pairs[config])]
        + [str(len(diff.of(kind, config)) or ".") for kind in kinds]
        for config in diff.configs
    ]
    rows.append(
        ["all", str(sum(diff.base_pairs.values())), str(sum(diff.new_pairs.values()))]
        + [str(len(diff.of(kind)) or ".") for kind in kinds]
    )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), *(line(r) for r in rows)])


def format_changes(diff: Diff, limit: int | None = 50) -> str:
    """Each kind's pairs, one a line (at most `limit` per kind)."""
    lines = []
    for kind in KINDS:
        changes = diff.of(kind)
        if not changes:
            continue
        if kind == "slower":
            lines.append(f"{kind} ({len(changes)}; more than {diff.time_factor:g}x):")
        else:
            lines.append(f"{kind} ({len(changes)}):")
        shown = changes if limit is None else changes[:limit]
        for change in shown:
            mark = "  NEW FAILURE" if change.new_failure and kind != "newly failing" else ""
            lines.append(f"  {change.config:>14}  {change.test}: {change.describe()}{mark}")
        if len(shown) < len(changes):
            lines.append(f"  ... {len(changes) - len(shown)} more (--html writes them all)")
    return "\n".join(lines)


def format_report(diff: Diff, limit: int | None = 50) -> str:
    verdict = (
        f"{len(diff.new_failures)} new failure{'s' if len(diff.new_failures) != 1 else ''}"
        if diff.new_failures
        else "no new failure"
    )
    changed = len({(c.test, c.config) for c in diff.changes})
    text = [format_table(diff), "", f"{changed} pairs changed; {verdict}"]
    details = format_changes(diff, limit)
    if details:
        text += ["", details]
    return "\n".join(text)


def run_lines(label: str, path: str, rows: list[dict], run: dict) -> str:
    what = [f"{len(rows)} pairs"]
    for key in ("run_id", "status", "torch", "torch_mlir", "shape_mode"):
        if run.get(key):
            what.append(f"{key} {str(run[key]).split(' (')[0]}")
    return f"{label}: {path} ({'; '.join(what)})"


# --- HTML ---------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #1d1d1f; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d8d8dc; padding: 3px 10px; text-align: left; vertical-align: top; }
thead th { background: #f4f4f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.new-failure td { background: #fdecea; }
.muted { color: #6b6b70; }
code { font: 12px ui-monospace, Menlo, Consolas, monospace; }
"""


def render_html(diff: Diff, base_label: str, new_label: str) -> str:
    e = html.escape
    kinds = list(KINDS)
    head = "".join(f"<th>{e(k)}</th>" for k in ["config", "base", "new", *kinds])
    body = "".join(
        f'<tr data-config="{e(config)}"><th>{e(config)}</th><td class="num">{diff.base_pairs[config]}</td>'
        f'<td class="num">{diff.new_pairs[config]}</td>'
        + "".join(f'<td class="num" data-kind="{e(k)}">{len(diff.of(k, config))}</td>' for k in kinds)
        + "</tr>"
        for config in diff.configs
    )
    sections = []
    for kind, meaning in KINDS.items():
        changes = diff.of(kind)
        if not changes:
            continue
        items = "".join(
            f"<tr{' class=new-failure' if c.new_failure else ''}><td>{e(c.config)}</td><td>{e(c.test)}</td>"
            f"<td>{e(_state(c.base)) if c.base else '-'}</td><td>{e(_state(c.new)) if c.new else '-'}</td>"
            f"<td>{e(_detail(c))}</td></tr>"
            for c in changes
        )
        sections.append(
            f'<section data-kind="{e(kind)}"><h2>{e(kind)} ({len(changes)})</h2><p class="muted">{e(meaning)}</p>'
            "<table><thead><tr><th>config</th><th>test</th><th>base</th><th>new</th><th>detail</th></tr></thead>"
            f"<tbody>{items}</tbody></table></section>"
        )
    verdict = f"{len(diff.new_failures)} new failures" if diff.new_failures else "no new failure"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>e2e diff</title><style>{STYLE}</style></head><body>
<h1>e2e: what changed</h1>
<p>base: <code>{e(base_label)}</code><br>new: <code>{e(new_label)}</code></p>
<p id="verdict"><strong>{e(verdict)}</strong></p>
<table id="diff-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{"".join(sections) or "<p>No differences.</p>"}
</body></html>
"""


def _detail(change: Change) -> str:
    if change.kind == "slower":
        return change.describe()
    row = change.new if change.new is not None and failing(change.new) else change.base
    return (row or {}).get("signature") or ""


# --- command line ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="reports directory, results.json or results.jsonl of the earlier run")
    parser.add_argument("new", help="the same, of the later run")
    parser.add_argument("--html", type=Path, help="also write the comparison as an HTML page")
    parser.add_argument(
        "--time-factor",
        type=float,
        default=DEFAULT_TIME_FACTOR,
        help=f"report pairs that took more than this many times their BASE duration (default {DEFAULT_TIME_FACTOR:g})",
    )
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=DEFAULT_MIN_SECONDS,
        help=f"... and at least this long in NEW: shorter pairs are noise (default {DEFAULT_MIN_SECONDS:g})",
    )
    parser.add_argument("--limit", type=int, default=50, help="pairs listed per kind in the terminal (default 50)")
    args = parser.parse_args(argv)
    try:
        base_rows, base_run = load_rows(args.base)
        new_rows, new_run = load_rows(args.new)
        base_label, new_label = str(results_file(args.base)), str(results_file(args.new))
    except ResultsError as error:
        print(f"e2e.tools.diff: {error}", file=sys.stderr)
        return 2
    diff = compare(base_rows, new_rows, args.time_factor, args.min_seconds)
    print(run_lines("base", base_label, base_rows, base_run))
    print(run_lines("new ", new_label, new_rows, new_run))
    print()
    print(format_report(diff, args.limit))
    if args.html:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(render_html(diff, base_label, new_label), encoding="utf-8")
        print(f"\nhtml: {args.html}")
    return 1 if diff.new_failures else 0


if __name__ == "__main__":
    sys.exit(main())
