"""The op support matrix: per aten op (OpInfo entry) and config, does it compile and run right?

    python -m e2e.tools.support RESULTS... [-o docs/support.md] [--html PATH]
    python -m e2e.tools.support --sweep 4 -o docs/support.md --html PATH     # run the sweep first

RESULTS are reports directories or results files (`results.json` / `results.jsonl`) of
OpInfo sweep runs: one run, its merged shards (`python -m e2e.tools.merge`), or runs that share
no pair. Rows whose test is not an OpInfo sample (`OpInfo_<op>[_<variant>][_int64|_bool]_<k>`)
are left out. A cell is `pass` (every sample passes), the stage all samples fail in
(`backend`), or `partial k/n` (k of n samples pass; `backend+compare` when all fail in
several stages), with the most common failure signature of the cell (a footnote in
markdown, a tooltip and a list in HTML) and a link to a reproducer bundle where a row has
one. Expected failures count as failures: the matrix is about support, not about the
xfail sets. Prints the counts per config; writes markdown with `-o`, and beside it the
cells' statuses as data (`support.json`: what a fuzz campaign's triage reads, never the
page), HTML with `--html`.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from e2e.configs import CONFIG_NAMES, OPT_IN_CONFIG_NAMES, RUNTIME_CONFIG_NAMES
from e2e.configs.runtime import twin_of
from e2e.framework.results_files import ResultsError
from e2e.opinfo.op_matrix import op_of
from e2e.tools.merge import MergeError, check_overlaps, check_versions, read_inputs

PASS, PARTIAL, FAIL = "pass", "partial", "fail"
# The matrix's configs: the built-in ones and every runtime config whose RefBackend twin is one of
# them (onnx@iree's is the opt-in onnx config, which the sweep does not run).
SWEEP_CONFIGS = (
    *CONFIG_NAMES,
    *(name for name in RUNTIME_CONFIG_NAMES if twin_of(name.partition("@")[0]) in CONFIG_NAMES),
)
SWEEP_WORK = Path("reports/opinfo-sweep")
REGENERATE = "python -m e2e.tools.support --sweep 4 -o docs/support.md --html reports/opinfo-sweep/support.html"
MAX_SIGNATURE = 300  # characters of a signature shown


@dataclass
class Cell:
    samples: int = 0
    passed: int = 0
    stages: Counter = field(default_factory=Counter)  # failing stage (or outcome) -> samples
    signatures: Counter = field(default_factory=Counter)
    repro: str | None = None  # a failing sample's reproducer bundle

    def add(self, row: dict) -> None:
        self.samples += 1
        if row.get("outcome") == "pass":  # before xfail sets: an xfailed sample is a failure here
            self.passed += 1
            return
        self.stages[row.get("stage") or row.get("outcome") or "?"] += 1
        self.signatures[row.get("signature") or f"{row.get('outcome')} | {row.get('stage')}"] += 1
        self.repro = self.repro or row.get("repro_path")

    @property
    def status(self) -> str:
        return PASS if self.passed == self.samples else FAIL if self.passed == 0 else PARTIAL

    @property
    def signature(self) -> str | None:
        return self.signatures.most_common(1)[0][0] if self.signatures else None

    def text(self) -> str:
        if self.status == PASS:
            return "pass"
        if self.status == FAIL:  # the stage(s) they fail in, most samples first
            return "+".join(stage for stage, _ in self.stages.most_common())
        return f"partial {self.passed}/{self.samples}"


@dataclass
class Matrix:
    configs: list[str]
    ops: dict[str, dict[str, Cell]]  # op -> config -> cell, ops sorted
    run: dict
    skipped_rows: int = 0  # rows that are not OpInfo samples

    def counts(self, config: str) -> Counter:
        return Counter(row[config].status for row in self.ops.values() if config in row)

    def signatures(self) -> list[str]:
        """Failing cells' most common signatures, most frequent first: footnote k is [k-1]."""
        found = Counter(c.signature for row in self.ops.values() for c in row.values() if c.signature)
        return [signature for signature, _ in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))]


STATUSES_FORMAT = "e2e-support/1"


def statuses(matrix: Matrix) -> dict:
    """The matrix as data: each op's status (`pass`, `partial`, `fail`) per config."""
    ops = {op: {config: cell.status for config, cell in row.items()} for op, row in matrix.ops.items()}
    return {"format": STATUSES_FORMAT, "configs": matrix.configs, "ops": ops}


def config_order(configs) -> list[str]:
    """Built-in configs first, in their order, then the runtime configs, then any others."""
    known = [*CONFIG_NAMES, *OPT_IN_CONFIG_NAMES, *RUNTIME_CONFIG_NAMES]
    return [c for c in known if c in configs] + sorted(set(configs) - set(known))


def build(rows: list[dict], run: dict | None = None) -> Matrix:
    cells: dict[str, dict[str, Cell]] = defaultdict(lambda: defaultdict(Cell))
    skipped = 0
    for row in rows:
        op = op_of(row["test"])
        if op is None:
            skipped += 1
            continue
        cells[op][row["config"]].add(row)
    configs = config_order({config for row in cells.values() for config in row})
    return Matrix(configs, {op: dict(cells[op]) for op in sorted(cells)}, run or {}, skipped)


def load(paths: list[Path]) -> Matrix:
    """The matrix of the runs at `paths` (read as `e2e.tools.merge` reads them: no pair twice,
    one torch, torch-mlir and JIT target)."""
    inputs = read_inputs(paths)
    check_overlaps(inputs)
    check_versions(inputs)
    run = dict(next((s.run for s in inputs if s.run), {}))
    if run.get("command"):  # "/path/to/site-packages/pytest/__main__.py --opinfo-slice ..." as typed
        run["command"] = re.sub(r"^\S*/pytest/__main__\.py", "python -m pytest", str(run["command"]))
    if len(inputs) > 1:
        run = {**run, "command": "; ".join(str(s.run.get("command") or s.path) for s in inputs)}
    return build([row for s in inputs for row in s.rows], run)


def _version(value) -> str:
    return str(value).split(" (")[0]  # "2.13.0+cpu (/path/to/torch)" -> "2.13.0+cpu"


def header_facts(matrix: Matrix) -> list[str]:
    run = matrix.run
    facts = [f"generated {time.strftime('%Y-%m-%d', time.gmtime())}"]
    for key, label in (("torch", "torch"), ("torch_mlir", "torch-mlir"), ("jit_target", "JIT target")):
        if run.get(key):
            facts.append(f"{label} {_version(run[key])}")
    if run.get("started_at"):
        facts.append(f"run started {run['started_at']} ({run.get('status', 'unknown')})")
    return facts


def slice_note(matrix: Matrix) -> str:
    command = str(matrix.run.get("command", ""))
    if "--opinfo-slice ci" in command:
        return (
            "This is the **CI slice** of the OpInfo sweep (sample 0 of one op in 8), not the full sweep: "
            "most ops are missing and each cell is one sample."
        )
    if "--opinfo-slice full" in command or "merged_from" in matrix.run:
        return "From the OpInfo sweep run recorded below."
    return "From the run recorded below."


EXPLAIN = (
    "A cell is `pass` (every sample of the op passes on the config), the stage every sample fails in "
    "(e.g. `backend`; `backend+compare` when they fail in several), or `partial k/n` (k of n samples pass). Expected failures (xfail entries) count as failures: the matrix is about support, not about the "
    "xfail sets. A sample a config cannot honour counts as not passing, shown as `skip`."
)


def _rel(path: str, page: Path) -> str:
    return os.path.relpath(Path(path).resolve(), page.resolve().parent)


def render_markdown(matrix: Matrix, page: Path) -> str:
    notes = {s: i + 1 for i, s in enumerate(matrix.signatures())}
    out = ["# Op support matrix", "", " · ".join(header_facts(matrix)), "", slice_note(matrix), "", EXPLAIN, ""]
    if matrix.run.get("command"):
        out += [f"Run: `{matrix.run['command']}`", ""]
    out += ["| config | ops | pass | partial | fail |", "|---|---:|---:|---:|---:|"]
    for config in matrix.configs:
        n = matrix.counts(config)
        out.append(f"| {config} | {sum(n.values())} | {n[PASS]} | {n[PARTIAL]} | {n[FAIL]} |")
    out += ["", "| op | " + " | ".join(matrix.configs) + " |", "|---" * (len(matrix.configs) + 1) + "|"]
    unlinked = 0
    for op, row in matrix.ops.items():
        cells = []
        for config in matrix.configs:
            cell = row.get(config)
            if cell is None:
                cells.append("-")
                continue
            text = cell.text()
            if cell.repro:
                inside = Path(cell.repro).resolve().is_relative_to(page.resolve().parent)
                text, unlinked = (f"[{text}]({_rel(cell.repro, page)})", unlinked) if inside else (text, unlinked + 1)
            cells.append(text + (f" [{notes[cell.signature]}]" if cell.signature else ""))
        out.append(f"| `{op}` | " + " | ".join(cells) + " |")
    if notes:
        out += ["", "Most common failure signature of each failing cell, `[k]` in the table:", ""]
        out += [f"{k}. `{_short(s)}`" for s, k in notes.items()]
    if unlinked:
        out += ["", f"{unlinked} cells have a reproducer bundle outside this page's folder: the HTML page links them."]
    out += [
        "",
        "## Regenerating the full matrix",
        "",
        "One command runs the full sweep as shards, merges them and writes this page:",
        "",
    ]
    out += [f"    {REGENERATE}", "", "Each shard is", ""]
    out += [
        f"    {shlex.join(['python', *shard_command(1, 4, SWEEP_CONFIGS, SWEEP_WORK, 2)[1:]]).replace('1/4', 'I/4')}"
    ]
    out += [
        "",
        "(on N machines: one shard each, then `python -m e2e.tools.merge` and `python -m e2e.tools.support MERGED`;",
        "see [running.md](running.md#shards) and [ci.md](ci.md)).",
        "",
    ]
    return "\n".join(out)


def _short(signature: str) -> str:
    """The signature on one line; a message that names the cause before its location keeps the cause."""
    text = " ".join(signature.split()).replace("`", "'")
    head, cut, _ = text.partition("; loc: ")
    text = head if cut and head.count(" | ") == 2 else text
    return text if len(text) <= MAX_SIGNATURE else text[: MAX_SIGNATURE - 3] + "..."


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #1d1d1f; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d8d8dc; padding: 2px 8px; text-align: left; }
thead th { background: #f4f4f6; position: sticky; top: 0; }
td.pass { background: #e6f4ea; } td.partial { background: #fff4d6; } td.fail { background: #fdecea; }
td.num { text-align: right; }
code { font: 12px ui-monospace, Menlo, Consolas, monospace; }
"""


def render_html(matrix: Matrix, page: Path) -> str:
    e = html.escape
    notes = {s: i + 1 for i, s in enumerate(matrix.signatures())}
    counts = "".join(
        f'<tr><th>{e(c)}</th><td class="num">{sum(n.values())}</td><td class="num">{n[PASS]}</td>'
        f'<td class="num">{n[PARTIAL]}</td><td class="num">{n[FAIL]}</td></tr>'
        for c in matrix.configs
        for n in [matrix.counts(c)]
    )
    rows = []
    for op, row in matrix.ops.items():
        cells = []
        for config in matrix.configs:
            cell = row.get(config)
            if cell is None:
                cells.append("<td>-</td>")
                continue
            text = e(cell.text())
            if cell.repro:
                text = f'<a href="{e(_rel(cell.repro, page))}">{text}</a>'
            title = ""
            if cell.signature:
                title = f' title="{e(cell.signature)} ({cell.signatures[cell.signature]} of {cell.samples})"'
                text += f' <a href="#sig-{notes[cell.signature]}">[{notes[cell.signature]}]</a>'
            cells.append(f'<td class="{cell.status}" data-config="{e(config)}"{title}>{text}</td>')
        rows.append(f'<tr data-op="{e(op)}"><th><code>{e(op)}</code></th>{"".join(cells)}</tr>')
    signatures = "".join(f'<li id="sig-{k}"><code>{e(s)}</code></li>' for s, k in notes.items())
    head = "".join(f"<th>{e(c)}</th>" for c in matrix.configs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Op support matrix</title><style>{STYLE}</style></head><body>
<h1>Op support matrix</h1>
<p>{e(" · ".join(header_facts(matrix)))}</p>
<p>{e(slice_note(matrix).replace("**", ""))}</p>
<p>{e(EXPLAIN.replace("`", ""))}</p>
<p>Run: <code>{e(str(matrix.run.get("command", "-")))}</code></p>
<table id="counts"><thead><tr><th>config</th><th>ops</th><th>pass</th><th>partial</th><th>fail</th></tr></thead>
<tbody>{counts}</tbody></table>
<table id="matrix"><thead><tr><th>op</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>
<h2>Failure signatures</h2><ol>{signatures}</ol>
<h2>Regenerating the full matrix</h2><pre>{e(REGENERATE)}</pre>
</body></html>
"""


def shard_command(index: int, count: int, configs: Sequence[str], work: Path, workers: int) -> list[str]:
    """One shard of the full sweep: every failure is a support fact here, not a bundle to reduce
    (`--no-reduce`; a runtime's failure still gets its native bundle), and pytest's cache is
    kept out so every shard computes the same plan (durations from a cache would change it)."""
    return [
        sys.executable, "-m", "pytest", "--opinfo-slice", "full", "-q", "-n", str(workers),
        "--no-result-cache", "--no-reduce", "-p", "no:cacheprovider", "--config", ",".join(configs),
        "--shard", f"{index}/{count}", "--reports-dir", str(work / f"shard-{index}"),
    ]  # fmt: skip


def sweep(count: int, configs: Sequence[str], work: Path, workers: int) -> Path:
    """Run the full sweep as `count` shards, one after another, and merge them into
    `work/merged`; returns it. A shard may fail pairs (exit 1: that is what the matrix is
    about); a shard that ran nothing or broke (any other status) stops the sweep."""
    from e2e.tools.merge import merge

    for index in range(1, count + 1):
        command = shard_command(index, count, configs, work, workers)
        print(f"shard {index}/{count}: {shlex.join(command)}", flush=True)
        start = time.monotonic()
        status = subprocess.run(command).returncode
        print(f"shard {index}/{count}: exit {status} after {time.monotonic() - start:.0f} s", flush=True)
        if status not in (0, 1):
            raise MergeError(f"shard {index}/{count} exited {status}: see {work / f'shard-{index}'}")
    merged = work / "merged"
    if merged.exists():
        shutil.rmtree(merged)
    merge(sorted(work.glob("shard-*")), merged, command=f"python -m e2e.tools.support --sweep {count}")
    return merged


def summary(matrix: Matrix) -> str:
    lines = [f"{len(matrix.ops)} ops; per config: pass / partial / fail"]
    for config in matrix.configs:
        n = matrix.counts(config)
        lines.append(f"  {config:>16}  {n[PASS]:>4} / {n[PARTIAL]:>4} / {n[FAIL]:>4}")
    if matrix.skipped_rows:
        lines.append(f"  ({matrix.skipped_rows} rows are not OpInfo samples: left out)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.support", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", type=Path, help="reports directories or results files")
    parser.add_argument("-o", "--output", type=Path, help="write the matrix as markdown (e.g. docs/support.md)")
    parser.add_argument("--html", type=Path, help="write the matrix as an HTML page")
    parser.add_argument(
        "--sweep", type=int, metavar="N", help="run the full OpInfo sweep first, as N shards one after another"
    )
    parser.add_argument("--configs", default=",".join(SWEEP_CONFIGS), help="the sweep's configs (default: %(default)s)")
    parser.add_argument("--work", type=Path, default=SWEEP_WORK, help="the sweep's reports (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per shard (default: 2)")
    args = parser.parse_args(argv)
    if bool(args.sweep) == bool(args.results):
        parser.error("give either results to read or --sweep N, not both")
    try:
        results = [sweep(args.sweep, args.configs.split(","), args.work, args.workers)] if args.sweep else args.results
        matrix = load(results)
    except (ResultsError, MergeError) as error:
        print(f"e2e.tools.support: {error}", file=sys.stderr)
        return 2
    if not matrix.ops:
        print("e2e.tools.support: no OpInfo_* tests in the results", file=sys.stderr)
        return 2
    print(summary(matrix))
    for path, render in ((args.output, render_markdown), (args.html, render_html)):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(matrix, path), encoding="utf-8")
            print(f"written: {path} ({path.stat().st_size} bytes)")
    if args.output:
        data = args.output.with_suffix(".json")
        data.write_text(json.dumps(statuses(matrix), indent=0, sort_keys=True) + "\n", encoding="utf-8")
        print(f"written: {data} ({data.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
