"""The kill matrix: per mutation, the sites it changed, the tests it reached, the tests
that caught it and the survivors; as a terminal table, JSON and a static HTML page."""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from e2e.mutation.catalogue import Mutation
from e2e.mutation.run import BROKEN_MUTATION, CAUGHT, EQUIVALENT, SURVIVED, TestRecord, mutation_key


def kill_matrix(records: list[TestRecord], catalogue: list[Mutation]) -> list[dict]:
    """One row per mutation. Only tests whose unmutated program passes can catch a mutation;
    a reached test that does not pass is counted apart (`reached_not_passing`)."""
    rows = []
    for mutation in catalogue:
        key = mutation_key(mutation)
        row = dict(
            name=mutation.name,
            boundary=mutation.boundary,
            family=mutation.family,
            description=mutation.description,
            sites=0,
            reached=0,
            reached_not_passing=0,
            caught_by=Counter(),
            caught=[],
            survivors=[],
            broken=[],
        )
        for record in records:
            count = record.sites.get(key, 0)
            if not count:
                continue
            if record.baseline != "pass":
                row["reached_not_passing"] += 1
                continue
            row["sites"] += count
            row["reached"] += 1
            verdict, detail = record.verdicts.get(key, [SURVIVED, "not run"])
            entry = dict(test=record.test, file=record.file, sites=count, verdict=verdict, detail=detail)
            if verdict in CAUGHT:
                row["caught_by"][verdict] += 1
                row["caught"].append(entry)
            elif verdict == BROKEN_MUTATION:
                row["broken"].append(entry)
            else:
                row["survivors"].append(entry)
        row["caught_by"] = dict(row["caught_by"])
        rows.append(row)
    return rows


def status(row: dict) -> str:
    if row["broken"]:
        return "BROKEN MUTATION"
    if not row["reached"]:
        return "unreached"
    if row["caught"]:
        return "killed"
    if all(e["verdict"] == EQUIVALENT for e in row["survivors"]):
        return "equivalent"
    return "SURVIVES"


def terminal_table(rows: list[dict]) -> str:
    head = f"{'mutation':<34} {'at':<13} {'sites':>6} {'reached':>7} {'caught':>6} {'surv':>5}  how caught / status"
    lines = [head, "-" * len(head)]
    for row in rows:
        how = ", ".join(f"{k} {v}" for k, v in sorted(row["caught_by"].items()))
        lines.append(
            f"{row['name']:<34} {row['boundary']:<13} {row['sites']:>6} {row['reached']:>7} "
            f"{len(row['caught']):>6} {len(row['survivors']):>5}  {status(row)}{': ' + how if how else ''}"
        )
    reached = [r for r in rows if r["reached"]]
    killed = [r for r in reached if r["caught"]]
    equivalent = [r for r in reached if status(r) == "equivalent"]
    lines.append(
        f"{len(killed)} of {len(reached)} reached mutations killed, {len(equivalent)} equivalent on "
        f"boundary inputs, {len(reached) - len(killed) - len(equivalent)} survive; "
        f"{len(rows) - len(reached)} reached no passing test"
    )
    return "\n".join(lines)


def write_json(rows: list[dict], run: dict, records: list[TestRecord], path: Path) -> None:
    data = dict(
        run=run,
        matrix=rows,
        tests=[dict(test=r.test, file=r.file, baseline=r.baseline, seconds=r.seconds) for r in records],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 48px;color:#1d1d1f}
table{border-collapse:collapse}th,td{border:1px solid #d8d8dc;padding:3px 8px;vertical-align:top}
thead th{background:#f4f4f6;position:sticky;top:0}.num{text-align:right}
tr.SURVIVES td.st{background:#c62828;color:#fff;font-weight:600}tr.killed td.st{color:#2e7d32;font-weight:600}
tr.unreached td{color:#9e9e9e}tr.equivalent td.st{color:#6b6b70;font-weight:600}code{font:12px ui-monospace,monospace}details{max-width:900px}
li{margin:1px 0}.muted{color:#6b6b70}"""


def _tests_list(entries: list[dict]) -> str:
    items = "".join(
        f"<li><code>{html.escape(e['test'])}</code> <span class=muted>({html.escape(e['file'])}, "
        f"{e['sites']} sites) {html.escape(e['verdict'])} {html.escape(e['detail'][:200])}</span></li>"
        for e in entries
    )
    return f"<ul>{items}</ul>" if entries else ""


def write_html(rows: list[dict], run: dict, path: Path) -> None:
    meta = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in run.items())
    body = []
    for row in rows:
        caught = ", ".join(f"{k} {v}" for k, v in sorted(row["caught_by"].items()))
        details = ""
        if row["caught"] or row["survivors"]:
            details = (
                f"<details><summary>{len(row['caught'])} caught, {len(row['survivors'])} survived</summary>"
                f"<b>caught</b>{_tests_list(row['caught'])}<b>survivors</b>{_tests_list(row['survivors'])}</details>"
            )
        body.append(
            f"<tr class='{status(row)}'><td><code>{html.escape(row['name'])}</code><br>"
            f"<span class=muted>{html.escape(row['description'])}</span></td><td>{row['boundary']}</td>"
            f"<td>{html.escape(row['family'])}</td><td class=num>{row['sites']}</td><td class=num>{row['reached']}</td>"
            f"<td class=num>{len(row['caught'])}</td><td class=num>{len(row['survivors'])}</td>"
            f"<td class=st>{status(row)}</td><td>{html.escape(caught)}{details}</td></tr>"
        )
    page = (
        f"<!doctype html><meta charset=utf-8><title>kill matrix: {html.escape(str(run.get('config')))}</title>"
        f"<style>{_STYLE}</style><h1>Mutation kill matrix</h1><table>{meta}</table><h2>Mutations</h2>"
        "<table><thead><tr><th>mutation</th><th>boundary</th><th>family</th><th>sites</th><th>reached</th>"
        "<th>caught</th><th>survived</th><th>status</th><th>how caught</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)


def before_after(before: list[dict], after: list[dict]) -> str:
    """Per mutation: reached / caught / status in an earlier matrix and in this one."""
    old = {row["name"]: row for row in before}
    head = f"{'mutation':<34} {'reached':>15} {'caught':>13}  status before -> after"
    lines = [head, "-" * len(head)]
    for row in after:
        was = old.get(row["name"])
        if was is None or (not was["reached"] and not row["reached"]):
            continue
        lines.append(
            f"{row['name']:<34} {was['reached']:>6} -> {row['reached']:<6} {len(was['caught']):>4} -> "
            f"{len(row['caught']):<4}  {status(was)} -> {status(row)}"
        )
    return "\n".join(lines)
