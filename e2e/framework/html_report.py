"""The HTML report of a run: one static page that says what works where.

`write_html(rows, run, path)` writes a single file with its CSS, script and data inline
(no server, no network): run metadata, per-config counts (the terminal's e2e summary), the
tables suites add (`ReportTable`, data: e.g. the StableHLO testdata's op families x
executors), a tests x configs matrix coloured by outcome and failing stage with filters,
and one section per failure signature. Links to saved IR and reproducer bundles are
relative to the page, so the reports folder can be zipped and opened elsewhere.

    python -m e2e.framework.html_report reports/results.json [-o reports/index.html]

(The command rewrites a page without the suites' tables: the framework imports no suite;
the run's own page and `python -m e2e.tools.merge`'s have them.)
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shlex
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import quote

from e2e.framework import hang_stack
from e2e.framework.html_page import PAGE_SCRIPT, PAGE_STYLE
from e2e.framework.result import VERDICT_KINDS

# Final outcomes as the plugin records them (after xfail sets), in display order.
FINAL_OUTCOMES = ("passed", "failed", "xfailed", "xpassed", "skipped")
# A failing pair's error is embedded up to this many characters; its IR and bundle hold the rest.
ERROR_LIMIT = 8000
# Run metadata shown first, in this order, with these labels; other keys follow as given.
RUN_FIELDS = {
    "status": "status",
    "torch": "torch",
    "torch_path": "torch imported from",
    "torch_mlir": "torch-mlir",
    "torch_mlir_path": "torch-mlir imported from",
    "shape_mode": "shape mode",
    "platform": "platform (torch's kernel ISA)",
    "cpu": "CPU",
    "configs": "configs",
    "started": "started",
    "duration": "duration",
    "command": "command",
}


@dataclass(frozen=True)
class ReportTable:
    """A table a suite adds to the page, as data: the framework renders it knowing no suite
    (the tables of a run come from `e2e.tools.report_tables`)."""

    id: str  # the section's HTML id
    title: str
    note: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # the first cell names the row; the others are numbers


def write_html(
    rows: list[dict],
    run: dict,
    path: Path | str,
    tables: Sequence[ReportTable] = (),
    changes: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> Path:
    """Write the report of `rows` (the records of results.json) and `run` (metadata) to `path`,
    with `tables` after the per-config counts and, given a baseline's `changes` ((test,
    config) -> what changed there, `e2e.tools.diff.Diff.by_pair`), those cells marked."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_html(rows, run, path.parent, tables, changes)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)  # a reader never sees half a page
    return path


def render_html(
    rows: list[dict],
    run: dict,
    report_dir: Path,
    tables: Sequence[ReportTable] = (),
    changes: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> str:
    """The page for `rows`, with links relative to `report_dir`."""
    data = page_data(rows, report_dir, changes)
    title = "e2e report" + (" (interrupted)" if run.get("status") == "interrupted" else "")
    # `<` is escaped so no string in the data can close the script element.
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<script>
window.e2eErrors = [];
window.addEventListener("error", function (e) {{
  window.e2eErrors.push(String(e.message || e));
  document.documentElement.setAttribute("data-js-errors", window.e2eErrors.join(" | "));
}});
</script>
<style>{PAGE_STYLE}</style>
</head><body>
<header>
<h1>PyTorch &rarr; MLIR e2e report</h1>
{_run_section(rows, run)}
</header>
<main>
<section id="summary"><h2>Per config</h2>
{_counts_table(rows)}
</section>
{_runtimes_section(rows)}
{"".join(_table_section(table) for table in tables)}
<section id="matrix-section"><h2>Tests &times; configs</h2>
<div id="filters"></div>
<div id="legend"></div>
<p id="shown" class="muted"></p>
<noscript><p class="banner">The matrix and the signature sections need JavaScript; the counts above do not.</p></noscript>
<div id="matrix-wrap"><table id="matrix"><thead></thead><tbody></tbody></table></div>
</section>
<section id="signatures-section"><h2>Failures by signature</h2>
<p class="muted">Each signature is one failure cause: stage, pass or op, normalized first error. Largest first.</p>
<div id="signatures"></div>
</section>
</main>
<aside id="detail" hidden></aside>
<script type="application/json" id="e2e-data">{payload}</script>
<script>{PAGE_SCRIPT}</script>
</body></html>
"""


def page_data(
    rows: list[dict], report_dir: Path, changes: Mapping[tuple[str, str], Sequence[str]] | None = None
) -> dict:
    """What the page's script reads: configs, tests, signatures and one record per pair (`x`:
    what changed since the baseline, when there is one and the pair changed)."""
    configs = sorted({row["config"] for row in rows})
    tests = sorted({row["test"] for row in rows})
    signatures = sorted({row["signature"] for row in rows if row.get("signature")})
    config_index = {name: i for i, name in enumerate(configs)}
    test_index = {name: i for i, name in enumerate(tests)}
    signature_index = {text: i for i, text in enumerate(signatures)}
    cells = []
    for row in rows:
        cell = {
            "t": test_index[row["test"]],
            "c": config_index[row["config"]],
            "f": row["final"],
            "o": row.get("outcome", ""),
            "d": round(float(row.get("duration") or 0.0), 2),
        }
        if row["final"] != "passed":
            cell.update(
                s=row.get("stage") or "",
                g=signature_index.get(row.get("signature") or "", -1),
                e=_clip(row.get("error") or ""),
                n=list(row.get("notes") or []),
                m=row.get("shape_mode") or "",
                ir=_link(row.get("ir_path"), report_dir),
                rp=_link(row.get("repro_path"), report_dir),
                cmd=rerun_command(row),
            )
            if row.get("outcome") == "timeout":  # what the host was doing when killed (`hang_stack`)
                cell["hs"] = _hang_stack_link(report_dir, row)
        elif row.get("notes"):
            cell["n"] = list(row["notes"])
        if changes and (change := changes.get((row["test"], row["config"]))):
            cell["x"] = "; ".join(change)
        cells.append(cell)
    data = {"configs": configs, "tests": tests, "signatures": signatures, "cells": cells}
    if changes is not None:
        data["baseline"] = True
    return data


def _hang_stack_link(report_dir: Path, row: dict) -> str | None:
    """A timed-out pair's stack: its first attempt's when it ran again (a confirmed hang's
    Result is the first attempt's, and only that one has gdb's backtrace)."""
    pair = report_dir / "ir" / row["test"] / row["config"]
    for stack in (pair.with_name(f"{row['config']}.first-attempt") / hang_stack.FILE_NAME, pair / hang_stack.FILE_NAME):
        if stack.is_file():
            return _link(str(stack), report_dir)
    return None


def rerun_command(row: dict) -> str:
    """The command that reruns one pair, as the run printed it (older rows: by node id)."""
    if row.get("rerun"):
        return row["rerun"]
    if row.get("nodeid"):
        return f"pytest '{row['nodeid']}'"
    return f"pytest e2e -k '{row['test']} and {row['config']}'"


def config_counts(rows: list[dict]) -> dict[str, Counter]:
    """Per config, pairs by final outcome: the numbers of the terminal's e2e summary."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        counts[row["config"]][row["final"]] += 1
    return dict(sorted(counts.items()))


def _clip(text: str) -> str:
    if len(text) <= ERROR_LIMIT:
        return text
    return text[:ERROR_LIMIT] + f"\n... ({len(text) - ERROR_LIMIT} more characters: see the saved IR or bundle)"


def _link(path: str | None, report_dir: Path) -> str | None:
    """`path` as a URL relative to `report_dir`, found even if the run's folder was moved."""
    if not path:
        return None
    given = Path(path)
    found = given if given.exists() else None
    if found is None:
        # Rows keep the paths of the machine that ran; the files sit under the report's folder.
        parts = given.parts[1:] if given.is_absolute() else given.parts
        for start in range(len(parts)):
            candidate = report_dir / Path(*parts[start:])
            if candidate.exists():
                found = candidate
                break
    target = (found or given).absolute()
    return quote(Path(os.path.relpath(target, report_dir.absolute())).as_posix())


def _run_section(rows: list[dict], run: dict) -> str:
    run = dict(run)
    run.setdefault("configs", ", ".join(sorted({row["config"] for row in rows})))
    run.setdefault("shape_mode", ", ".join(sorted({row.get("shape_mode") or "annotated" for row in rows})))
    tests = len({row["test"] for row in rows})
    pair_seconds = sum(float(row.get("duration") or 0.0) for row in rows)
    run.setdefault("pairs", f"{len(rows)} ({tests} tests); {pair_seconds:.0f} pair-seconds")
    labels = {**RUN_FIELDS, "pairs": "pairs"}
    keys = [k for k in labels if k in run] + [k for k in run if k not in labels]
    items = "".join(
        f"<tr><th>{html.escape(labels.get(k, k))}</th><td>{html.escape(_run_value(k, run[k]))}</td></tr>" for k in keys
    )
    banner = ""
    if run.get("status") == "interrupted":
        banner = '<p class="banner">This run was interrupted: the report shows only the pairs that finished.</p>'
    return f'{banner}<table id="run">{items}</table>'


def _run_value(key: str, value) -> str:
    if key == "duration" and isinstance(value, (int, float)):
        minutes, seconds = divmod(float(value), 60)
        return f"{int(minutes)} min {seconds:.0f} s" if minutes else f"{seconds:.1f} s"
    if key == "started" and isinstance(value, (int, float)):  # a time.time() stamp
        return datetime.fromtimestamp(value, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value) if key == "command" else ", ".join(str(v) for v in value)
    return str(value)


def _counts_table(rows: list[dict]) -> str:
    counts = config_counts(rows)
    stages: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        if row["final"] not in ("passed", "xpassed") and row.get("stage"):
            stages[row["config"]][row["stage"]] += 1
    outcomes = [o for o in FINAL_OUTCOMES if any(c[o] for c in counts.values())]
    outcomes += sorted({o for c in counts.values() for o in c} - set(outcomes))
    head = "".join(f'<th class="num f-{o}">{o}</th>' for o in outcomes)
    body = []
    for config, counter in counts.items():
        cells = "".join(f'<td class="num" data-outcome="{o}">{counter[o]}</td>' for o in outcomes)
        top = ", ".join(f"{stage} {n}" for stage, n in stages[config].most_common(4))
        total = sum(counter.values())
        bar = "".join(
            f'<span class="f-{o}" style="width:{100 * counter[o] / total:.2f}%" title="{counter[o]} {o}"></span>'
            for o in outcomes
            if counter[o]
        )
        body.append(
            f'<tr data-config="{html.escape(config)}"><th>{html.escape(config)}</th>'
            f'<td class="num" data-outcome="total">{total}</td>{cells}'
            f'<td><div class="bar">{bar}</div></td><td class="muted">{html.escape(top)}</td></tr>'
        )
    return (
        f'<table id="counts"><thead><tr><th>config</th><th class="num">run</th>{head}'
        f"<th>share</th><th>failing stages</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def runtime_verdicts(rows: list[dict]) -> dict[str, dict]:
    """Per runtime config in `rows` (a config whose pairs name a `twin`): its RefBackend twin,
    its pairs by `verdict` (`agree`: runtime and twin both match torch or neither was judged),
    and the pairs on which they disagree, with the twin's own outcome when the run had it."""
    final = {(row["test"], row["config"]): row["final"] for row in rows}
    twins = {row["config"]: row["twin"] for row in rows if row.get("twin")}
    found: dict[str, dict] = {}
    for row in rows:
        if row["config"] not in twins:
            continue
        twin = twins[row["config"]]
        entry = found.setdefault(row["config"], {"twin": twin, "counts": Counter(), "disagreements": []})
        entry["counts"][row.get("verdict") or "agree"] += 1
        if row.get("verdict"):
            note = row.get("verdict_reason") or row["verdict"]
            entry["disagreements"].append(
                (row["test"], final.get((row["test"], twin), "not in this run"), row["final"], note)
            )
    return dict(sorted(found.items()))


def _runtimes_section(rows: list[dict]) -> str:
    """Runtime configs beside their RefBackend twins: where the two executors disagree."""
    verdicts = runtime_verdicts(rows)
    if not verdicts:
        return ""
    kinds = ["agree", *VERDICT_KINDS]
    head = "".join(f'<th class="num">{html.escape(k)}</th>' for k in kinds)
    body = "".join(
        f"<tr><th>{html.escape(config)}</th><td>{html.escape(entry['twin'])}</td>"
        + "".join(f'<td class="num" data-verdict="{k}">{entry["counts"][k]}</td>' for k in kinds)
        + "</tr>"
        for config, entry in verdicts.items()
    )
    details = []
    for config, entry in verdicts.items():
        if not entry["disagreements"]:
            continue
        items = "".join(
            f"<tr><td>{html.escape(test)}</td><td class='f-{html.escape(twin)}'>{html.escape(twin)}</td>"
            f"<td class='f-{html.escape(mine)}'>{html.escape(mine)}</td><td>{html.escape(note)}</td></tr>"
            for test, twin, mine, note in sorted(entry["disagreements"])
        )
        details.append(
            f'<details data-runtime="{html.escape(config)}"><summary>{html.escape(config)} vs '
            f"{html.escape(entry['twin'])}: {len(entry['disagreements'])} disagreements</summary>"
            f"<table><thead><tr><th>test</th><th>{html.escape(entry['twin'])}</th><th>{html.escape(config)}</th>"
            f"<th>verdict</th></tr></thead><tbody>{items}</tbody></table></details>"
        )
    return (
        '<section id="runtimes"><h2>Runtimes beside their RefBackend twins</h2>'
        '<p class="muted">Each runtime pair also runs the same lowered program on the RefBackend; a verdict '
        "says which of the two matches torch; `agree`: both match torch, or the pair failed before the two split.</p>"
        f'<table id="runtime-verdicts"><thead><tr><th>config</th><th>twin</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{''.join(details)}</section>"
    )


def _table_section(table: ReportTable) -> str:
    name, *numbers = table.header
    head = f"<th>{html.escape(name)}</th>" + "".join(f'<th class="num">{html.escape(cell)}</th>' for cell in numbers)
    body = "".join(
        f"<tr><th>{html.escape(row[0])}</th>"
        + "".join(f'<td class="num">{html.escape(cell)}</td>' for cell in row[1:])
        + "</tr>"
        for row in table.rows
    )
    return (
        f'<section id="{html.escape(table.id)}"><h2>{html.escape(table.title)}</h2>'
        f'<p class="muted">{html.escape(table.note)}</p>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )


def load_results(path: Path) -> tuple[list[dict], dict]:
    """Rows and run metadata from results.json: a list of rows, or {"run": ..., "rows": ...}."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, list):
        return data, {}
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        return data["rows"], dict(data.get("run") or {})
    raise ValueError(f"{path}: expected a list of result rows or an object with `rows`, got {type(data).__name__}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.framework.html_report", description="Write the HTML report of an e2e run."
    )
    parser.add_argument("results", type=Path, help="results.json of a run")
    parser.add_argument("-o", "--output", type=Path, help="the page to write (default: index.html beside results.json)")
    parser.add_argument(
        "--run", type=Path, help="a JSON file of run metadata (default: run.json beside results.json, if any)"
    )
    args = parser.parse_args(argv)
    try:
        rows, run = load_results(args.results)
        run_file = args.run or args.results.with_name("run.json")
        if args.run or run_file.exists():
            run = {**json.loads(run_file.read_text()), **run}
        missing = [i for i, row in enumerate(rows) if not {"test", "config", "final"} <= row.keys()]
        if missing:
            raise ValueError(
                f"{args.results}: row {missing[0]} lacks test, config or final; is this an e2e results.json?"
            )
    except (OSError, ValueError) as error:
        print(f"html_report: {error}", file=sys.stderr)
        return 2
    output = write_html(rows, run, args.output or args.results.with_name("index.html"))
    print(f"html report: {output} ({len(rows)} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
