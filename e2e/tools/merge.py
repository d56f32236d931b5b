"""One run's reports from the reports directories of its shards (or of any runs whose
pairs do not overlap: a config group run on another machine).

    python -m e2e.tools.merge SHARD_DIR... -o DIR [--allow-missing] [--baseline BASE]

Writes `DIR/results.json`, `results.jsonl`, `run.json` (a new run id; `merged_from`
names each input), `index.html` and `junit.xml`, and copies each input's saved IR and
reproducer bundles (`ir/`, `repro/`) so the page's links work; with `--baseline`, the
page marks the pairs that changed since that run (as `python -m e2e.tools.diff BASE DIR` lists
them). `python -m
e2e.configs.update_xfails DIR/results.json` and `python -m e2e.tools.diff` read the result.

It refuses, with the pairs or shards at fault:
- a pair (test, config) in two inputs (shards split with different items or durations,
  or one directory given twice);
- an incomplete set of shards: shards of one plan (`--shard I/N` with the same items and
  durations) must all be there (`--allow-missing` merges what there is, as an
  incomplete run);
- runs of different torch or torch-mlir versions, or JIT targets: their results are not
  one run's.
Each row keeps its shard's run id and gets its shard's platform (torch's kernel ISA),
which the xfail updater reads per row, so shards on different CPUs merge correctly.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

from e2e.framework.results_files import ResultsError, load_rows, pair, results_file
from e2e.framework.run_record import write_json_atomic
from e2e.framework.run_summary import hung_once

# Run metadata that must agree across inputs (compared without the paths they carry).
SAME_EVERYWHERE = ("torch", "torch_mlir", "jit_target")
COPIED_TREES = ("ir", "repro")  # what rows point into: saved IR and reproducer bundles


class MergeError(RuntimeError):
    pass


@dataclass
class Input:
    path: Path  # as given
    directory: Path  # the reports directory (a results file's folder)
    rows: list[dict]
    run: dict

    @property
    def shard(self) -> dict | None:
        shard = self.run.get("shard")
        return shard if isinstance(shard, dict) and "plan" in shard else None

    def label(self) -> str:
        shard = self.shard
        return f"{self.path} (shard {shard['index']}/{shard['count']})" if shard else str(self.path)


def read_inputs(paths: list[Path]) -> list[Input]:
    inputs, seen = [], {}
    for path in paths:
        file = results_file(path)
        directory = file.parent.resolve()
        if directory in seen:
            raise MergeError(f"{path} and {seen[directory]} are one reports directory: give it once")
        seen[directory] = path
        rows, run = load_rows(path)
        inputs.append(Input(Path(path), directory, rows, run))
    return inputs


def check_overlaps(inputs: list[Input]) -> None:
    owner: dict[tuple[str, str], Input] = {}
    clashes = []
    for source in inputs:
        for row in source.rows:
            key = pair(row)
            if key in owner and owner[key] is not source:
                clashes.append((key, owner[key], source))
            owner.setdefault(key, source)
    if clashes:
        shown = "\n".join(
            f"  {test} on {config}: in {a.label()} and {b.label()}" for (test, config), a, b in clashes[:10]
        )
        more = f"\n  ... {len(clashes) - 10} more" if len(clashes) > 10 else ""
        raise MergeError(
            f"{len(clashes)} pairs are in more than one input:\n{shown}{more}\n"
            "Shards of one run must be given the same items and the same --shard-durations, and each "
            "directory once; runs merged together must not share a pair."
        )


def check_shards(inputs: list[Input], allow_missing: bool) -> list[str]:
    """Every shard of each plan is there, once; returns what is missing (when allowed)."""
    plans: dict[str, list[Input]] = defaultdict(list)
    for source in inputs:
        if source.shard:
            plans[source.shard["plan"]].append(source)
    problems = []
    for digest, members in sorted(plans.items()):
        count = members[0].shard["count"]
        have = defaultdict(list)
        for member in members:
            have[member.shard["index"]].append(member)
        twice = {i: m for i, m in have.items() if len(m) > 1}
        if twice:
            raise MergeError(
                f"shard plan {digest}: "
                + "; ".join(
                    f"shard {i}/{count} given {len(m)} times ({', '.join(str(x.path) for x in m)})"
                    for i, m in sorted(twice.items())
                )
            )
        missing = sorted(set(range(1, count + 1)) - set(have))
        if missing:
            problems.append(
                f"shard plan {digest} ({', '.join(m.label() for m in members)}): "
                f"missing shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)}"
            )
    if problems and not allow_missing:
        hint = ""
        if len(plans) > 1:
            hint = (
                "\nShards whose plans differ were split differently: every shard of one run must be given the "
                "same arguments and the same --shard-durations (see docs/ci.md)."
            )
        raise MergeError(
            "incomplete shards:\n  " + "\n  ".join(problems) + hint + "\n(--allow-missing merges them anyway)"
        )
    return problems


def _version(value) -> str:
    return str(value).split(" (")[0]  # "2.13.0+cpu (/path/to/torch)" -> "2.13.0+cpu"


def check_versions(inputs: list[Input]) -> None:
    for key in SAME_EVERYWHERE:
        values = {_version(s.run[key]): s for s in inputs if s.run.get(key)}
        if len(values) > 1:
            listed = ", ".join(f"{value} ({source.path})" for value, source in values.items())
            raise MergeError(f"the inputs ran different {key}: {listed}; their results are not one run's")


def _relocate(path: str | None, source: Path, output: Path) -> str | None:
    """A row's IR or bundle path, in the merged directory (it was under `source`, on
    whatever machine ran the shard, or under an input merged before it)."""
    if not path:
        return path
    parts = Path(path).parts
    for start in range(len(parts)):
        inside = Path(*parts[start:])
        # or copied from an earlier input: a campaign block's failure sharing the bundle an
        # earlier block wrote (one claim index across the blocks)
        if parts[start] in COPIED_TREES and ((source / inside).exists() or (output / inside).exists()):
            return str(output / inside)
    return path


def _unique(values) -> str | None:
    found = sorted({str(v) for v in values if v not in (None, "")})
    return ", ".join(found) if found else None


def merged_run(inputs: list[Input], rows: list[dict], missing: list[str], command: str) -> dict:
    statuses = [s.run.get("status", "unknown") for s in inputs]
    status = "finished" if all(s == "finished" for s in statuses) else "interrupted"
    if missing:
        status = "incomplete"
    configs = list(
        dict.fromkeys(c for s in inputs for c in s.run.get("configs") or sorted({r["config"] for r in s.rows}))
    )
    first = next((s.run for s in inputs if s.run), {})
    run = {
        "run_id": uuid.uuid4().hex[:12],
        "status": status,
        "started_at": min((s.run["started_at"] for s in inputs if s.run.get("started_at")), default=None),
        "duration_s": max((float(s.run.get("duration_s") or 0) for s in inputs), default=0.0),
        "shard_seconds": round(sum(float(s.run.get("duration_s") or 0) for s in inputs), 1),
        "rows": len(rows),
        "command": command,
        "configs": configs,
        "shape_mode": _unique(s.run.get("shape_mode") for s in inputs),
        "torch": first.get("torch"),
        "torch_mlir": first.get("torch_mlir"),
        "platform": _unique(s.run.get("platform") for s in inputs),
        "cpu": _unique(s.run.get("cpu") for s in inputs),
        "jit_target": first.get("jit_target"),
        "commit": _unique(s.run.get("commit") for s in inputs),
        "branch": _unique(s.run.get("branch") for s in inputs),
        "machine": _unique(s.run.get("machine") for s in inputs),
        "versions": first.get("versions"),
        "budget_s": first.get("budget_s"),
        "memory_cap_gib": first.get("memory_cap_gib"),
        "exit_status": max((int(s.run.get("exit_status") or 0) for s in inputs), default=0),
        "hung_once": hung_once(rows),
        "merged_from": [
            {
                "path": str(s.path),
                "run_id": s.run.get("run_id"),
                "status": s.run.get("status"),
                "rows": len(s.rows),
                "duration_s": s.run.get("duration_s"),
                "platform": s.run.get("platform"),
                **({"shard": f"{s.shard['index']}/{s.shard['count']}", "plan": s.shard["plan"]} if s.shard else {}),
            }
            for s in inputs
        ],
    }
    if missing:
        run["missing"] = missing
    return {key: value for key, value in run.items() if value is not None}


def merge(
    paths: list[Path], output: Path, allow_missing: bool = False, command: str = "", baseline: Path | None = None
) -> dict:
    """Merge the runs at `paths` into `output`; returns the merged run record. With a
    `baseline` run, the HTML report marks the pairs that changed since it."""
    inputs = read_inputs(paths)
    if output.resolve() in {s.directory for s in inputs}:
        raise MergeError(f"-o {output} is one of the inputs: write the merged run elsewhere")
    check_overlaps(inputs)
    missing = check_shards(inputs, allow_missing)
    check_versions(inputs)
    output.mkdir(parents=True, exist_ok=True)
    rows = []
    for source in inputs:
        for tree in COPIED_TREES:
            if (source.directory / tree).is_dir():
                shutil.copytree(source.directory / tree, output / tree, dirs_exist_ok=True)
        platform = source.run.get("platform")
        for row in source.rows:
            row = dict(row)
            if platform and not row.get("platform"):
                row["platform"] = platform
            for key in ("ir_path", "repro_path"):
                if row.get(key):
                    row[key] = _relocate(row[key], source.directory, output.resolve())
            rows.append(row)
    rows.sort(key=lambda r: (r["test"], r["config"]))
    run = merged_run(inputs, rows, missing, command)
    write_json_atomic(output / "results.json", rows)
    (output / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_json_atomic(output / "run.json", run)
    write_junit(rows, output / "junit.xml")
    from e2e.framework.html_report import write_html
    from e2e.tools.report_tables import report_tables

    changes = None
    if baseline is not None:
        from e2e.tools.diff import compare

        changes = compare(load_rows(baseline)[0], rows).by_pair()
    write_html(rows, _page_run(run), output / "index.html", report_tables(rows), changes)
    return run


def _page_run(run: dict) -> dict:
    """The run record as the HTML page shows it: one line per merged input."""
    shown = {k: v for k, v in run.items() if k != "merged_from"}
    shown["merged_from"] = [
        f"{'shard ' + m['shard'] if 'shard' in m else 'run'}: {m['rows']} pairs {m.get('status')} in "
        f"{m.get('duration_s')} s ({m['path']})"
        for m in run.get("merged_from", [])
    ]
    return shown


# --- JUnit XML ----------------------------------------------------------------------------


def _junit_names(row: dict) -> tuple[str, str]:
    """classname and name as pytest's --junitxml writes them for the row's node id."""
    nodeid = row.get("nodeid") or f"{row['test']}::{row['config']}"
    parts = nodeid.split("::")
    parts[0] = parts[0].replace("/", ".").removesuffix(".py")
    return ".".join(parts[:-1]), parts[-1]


def write_junit(rows: list[dict], path: Path) -> Path:
    """A JUnit XML file with one testcase per row and the properties the plugin's
    --junitxml carries (e2e_stage, e2e_signature, e2e_ir_path, e2e_repro_path)."""
    suite = ET.Element("testsuite", name="e2e")
    counts = defaultdict(int)
    total_time = 0.0
    for row in rows:
        classname, name = _junit_names(row)
        seconds = float(row.get("duration") or 0.0)
        total_time += seconds
        case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{seconds:.3f}")
        properties = [
            (f"e2e_{key}", row[key])
            for key in ("stage", "signature", "ir_path", "repro_path", "shape_mode")
            if row.get(key) and (key == "shape_mode" or row.get("final") != "passed")
        ]
        if properties:
            holder = ET.SubElement(case, "properties")
            for key, value in properties:
                ET.SubElement(holder, "property", name=key, value=str(value))
        final = row.get("final")
        message = f"{row.get('outcome')}: {row.get('signature') or ''}".strip()
        if final == "failed":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=message).text = row.get("error") or message
        elif final == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", type="pytest.skip", message=row.get("error") or "skipped")
        elif final == "xfailed":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", type="pytest.xfail", message=message)
        if row.get("repro_path"):
            ET.SubElement(case, "system-out").text = f"[[ATTACHMENT|{row['repro_path']}]]\n"
    suite.set("tests", str(len(rows)))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", f"{total_time:.3f}")
    suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S"))
    document = ET.Element("testsuites")
    document.append(suite)
    ET.indent(document)
    path.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(document, encoding="unicode") + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="reports directories (or results files) of the shards")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the merged reports directory")
    parser.add_argument(
        "--allow-missing", action="store_true", help="merge an incomplete set of shards (the run says what is missing)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="an earlier run (reports dir or results file): the HTML report marks the pairs changed since",
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "e2e.tools.merge", *(sys.argv[1:] if argv is None else argv)])
    try:
        run = merge(args.inputs, args.output, args.allow_missing, command, args.baseline)
    except (MergeError, ResultsError) as error:
        print(f"e2e.tools.merge: {error}", file=sys.stderr)
        return 2
    print(
        f"merged {len(run['merged_from'])} runs: {run['rows']} pairs, status {run['status']}; "
        f"slowest input {run['duration_s']:.0f} s, {run['shard_seconds']:.0f} s in all"
    )
    for line in run.get("missing", []):
        print(f"  {line}")
    for name in ("results.json", "index.html", "junit.xml"):
        print(f"  {args.output / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
