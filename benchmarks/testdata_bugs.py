"""One reduced bundle per distinct bug of StableHLO's testdata xfail sets.

    python benchmarks/testdata_bugs.py                        # the distinct bugs per executor
    python benchmarks/testdata_bugs.py --run --reports-dir /tmp/testdata-bugs -n 2   # and a bundle each
    python benchmarks/testdata_bugs.py --table /tmp/testdata-bugs   # the table of that run again

A bug is one executor's xfail entries (`e2e/stablehlo_testdata/xfail/<config>.txt`) of one
outcome, signature key (stage | where) and message (digits as N, its first 60 characters,
and the op it names). A message that does not tell which op fails (`GENERIC`: "op was not
bufferized" covers scatter, while, fft, select_and_scatter ...) is split by the program's
op under test (`e2e.stablehlo_testdata.ops`), a wrong result (stage `compare`) by op under
test and the kind of its element type (complex, float, integer ...); a composite program (no op under test) by its op family. A bug's
representative is its smallest program file.

`--run` runs pytest once per executor on the representatives with `--reduce-xfailed`
(reports in `<reports-dir>/<config>/`; any other argument, `-n 2`, `--reduce-timeout 60`,
`-o cache_dir=...`, goes to pytest), then prints a Markdown table: per bug, its programs,
its representative, the bundle the reducer wrote (relative to the reports dir) or why
none, whether it re-verified, and its ops before -> after.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))  # run from anywhere in the checkout

from e2e.configs.xfails import read_xfails  # noqa: E402
from e2e.framework.results_files import load_rows  # noqa: E402
from e2e.framework.signature import Signature, guilty_op  # noqa: E402
from e2e.stablehlo_testdata.families import family  # noqa: E402
from e2e.stablehlo_testdata.ops import OpUse  # noqa: E402

XFAIL_DIR = CHECKOUT / "e2e" / "stablehlo_testdata" / "xfail"
SUITE = "e2e/stablehlo_testdata/suite"
SUITE_FILE = f"{SUITE}/stablehlo_testdata.py"
CONFIGS = {  # config name -> its attribute in e2e.stablehlo_testdata.configs
    "testdata-refbackend": "REFBACKEND",
    "testdata-interp": "INTERP",
    "testdata-xla": "XLA",
    "testdata-iree": "IREE",
}
MESSAGE_CHARS = 60
# Messages (digits as N) that do not say which op fails: split by the op under test.
GENERIC = (
    "op was not bufferized",  # one-shot-bufferize: any op the conversion to linalg left behind
    "crashed (signal N) in iree-compile",  # a crash outside any named pass
)


@dataclass
class Bug:
    """One executor's xfail entries that fail alike: the same outcome, signature key and message."""

    config: str
    outcome: str
    key: str  # the signature's stage | where
    message: str  # normalized: digits as N, cut short
    op: str = ""  # the op under test, when the message does not tell
    programs: list[str] = field(default_factory=list)

    def label(self) -> str:
        """`outcome: stage | where | message [op under test]`."""
        text = f"{self.outcome}: {self.key}" + (f" | {self.message}" if self.message else "")
        return text + (f" [{self.op}]" if self.op else "")


def message_key(message: str | None) -> str:
    """The message with digits as N, cut to MESSAGE_CHARS, and the op it names when that is cut off."""
    text = re.sub(r"\d+", "N", message or "")
    named = guilty_op(message or "")
    short = text[:MESSAGE_CHARS]
    return short + (f" ... {named}" if named and named not in short else "")


def is_generic(signature: Signature) -> bool:
    """A message that does not tell which op fails: a wrong result, none at all, or a `GENERIC` one."""
    message = re.sub(r"\d+", "N", signature.message or "")
    return signature.stage == "compare" or not message or any(words in message for words in GENERIC)


KINDS = [  # an element type's kind: what tells wrong results apart (complex exp, not exp on f32)
    (re.compile(r"complex<"), "complex"),
    (re.compile(r"!quant"), "quantized"),
    (re.compile(r"i1$"), "bool"),
    (re.compile(r"ui\d+$"), "unsigned"),
    (re.compile(r"i\d+$"), "integer"),
    (re.compile(r"b?f\d+$"), "float"),
]


def element_kind(element: str) -> str:
    """`f32` -> `float`, `complex<f64>` -> `complex`, `ui8->i32` -> `unsigned->integer`."""
    kinds = [next((kind for pattern, kind in KINDS if pattern.match(part)), part) for part in element.split("->")]
    return kinds[0] if len(set(kinds)) == 1 else "->".join(kinds)


def program_label(test: str, signature: Signature, op_of: Callable[[str], OpUse | None]) -> str:
    """What splits a generic bug: the op under test; for a wrong result, also its element type's kind."""
    use = op_of(test)
    if use is None:
        return f"no op under test: {family(test)}"
    return f"{use.op} on {element_kind(use.element)}" if signature.stage == "compare" else use.op


def distinct_bugs(config: str, entries: list[tuple[str, str]], op_of: Callable[[str], OpUse | None]) -> list[Bug]:
    """The distinct bugs of one executor's xfail entries (test, reason), most programs first;
    `op_of(test)` is a program's op under test, asked only of generic failures."""
    bugs: dict[tuple, Bug] = {}
    for test, reason in entries:
        outcome, _, text = reason.partition(": ")
        signature = Signature.parse(text)
        bug = Bug(config, outcome, signature.key(), message_key(signature.message))
        if is_generic(signature):
            bug.op = program_label(test, signature, op_of)
        identity = (bug.outcome, bug.key, bug.message, bug.op)
        bugs.setdefault(identity, bug).programs.append(test)
    return sorted(bugs.values(), key=lambda bug: (-len(bug.programs), bug.label()))


def recorded_bugs(corpus: Path) -> list[Bug]:
    """The distinct bugs of the four recorded xfail sets, ops under test read from `corpus`."""
    from compiler.stages import new_context
    from e2e.stablehlo_testdata.explain import program_op_under_test
    from e2e.stablehlo_testdata.register import program_path

    context = new_context()
    found = []
    for config in CONFIGS:
        entries = read_xfails(XFAIL_DIR / f"{config}.txt", None)
        pairs = [(entry.test, entry.reason) for entry in entries]
        found += distinct_bugs(
            config, pairs, lambda test: program_op_under_test(program_path(corpus, test), test, context)
        )
    return found


def representative(bug: Bug, corpus: Path) -> str:
    """The bug's smallest program file."""
    from e2e.stablehlo_testdata.register import program_path

    return min(bug.programs, key=lambda test: (program_path(corpus, test).stat().st_size, test))


def run_executor(config: str, tests: list[str], reports: Path, corpus: Path, pytest_args: list[str]) -> float:
    """pytest on `tests` with `config` and `--reduce-xfailed`; its wall time in seconds."""
    command = [
        sys.executable, "-m", "pytest", "--e2e-suite", SUITE, "--stablehlo-testdata", str(corpus),
        "--xfail-dir", str(XFAIL_DIR.relative_to(CHECKOUT)), "--config", f"e2e.stablehlo_testdata.configs:{CONFIGS[config]}",
        "--reduce-xfailed", "--no-result-cache", "-q", "--reports-dir", str(reports / config), *pytest_args,
        *(f"{SUITE_FILE}::{test}::{config}" for test in tests),
    ]  # fmt: skip
    print(f"$ {' '.join(command[:22])} ... ({len(tests)} node ids)", flush=True)
    start = time.monotonic()
    subprocess.run(command, cwd=CHECKOUT, check=False)
    return time.monotonic() - start


def bundle_cells(row: dict | None, reports: Path) -> tuple[str, str, str]:
    """(bundle or why none, verified, ops before -> after) of a representative's result row:
    its `bundle` field and the bundle's own record (`bundle.json`)."""
    if row is None:
        return "no result (not run)", "no", ""
    if row["outcome"] == "pass":
        return "passed: no failure to reduce", "no", ""
    if not row.get("bundle"):
        why = " ".join(row.get("notes", []))[:160] or "no bundle"
        return why.replace("|", "\\|"), "no", ""
    path = Path(row["bundle"])
    try:
        record = json.loads((path / "bundle.json").read_text())
    except (OSError, ValueError):
        record = {}
    ops = f"{record['ops_before']} -> {record['ops_after']}" if "ops_before" in record else ""
    shown = path.relative_to(reports) if path.is_relative_to(reports) else path
    shared = " (shared)" if path.parent.name != row["test"] else ""  # repro/<test>/<config>: another test's
    return f"`{shown}`{shared}", "yes" if row.get("repro_path") else "no", ops


def table(bugs: list[Bug], reports: Path, corpus: Path) -> list[str]:
    rows = {}
    for config in CONFIGS:
        if (reports / config).is_dir():  # results.json, or the rows so far of a run killed or still going
            rows.update({(row["test"], row["config"]): row for row in load_rows(reports / config)[0]})
    lines = [
        "| executor | bug | programs | representative | bundle | verified | ops |",
        "|---|---|---:|---|---|---|---|",
    ]
    verified: Counter = Counter()
    for bug in bugs:
        test = representative(bug, corpus)
        bundle, ok, ops = bundle_cells(rows.get((test, bug.config)), reports)
        verified[bug.config] += ok == "yes"
        label = bug.label().replace("|", "\\|")
        lines.append(f"| {bug.config} | {label} | {len(bug.programs)} | {test} | {bundle} | {ok} | {ops} |")
    lines.append("")
    for config in CONFIGS:
        mine = [bug for bug in bugs if bug.config == config]
        lines.append(f"{config}: {len(mine)} bugs, {verified[config]} with a verified bundle")
    return lines


def grouping(bugs: list[Bug]) -> list[str]:
    lines = []
    for config in CONFIGS:
        mine = [bug for bug in bugs if bug.config == config]
        lines.append(f"{config}: {sum(len(bug.programs) for bug in mine)} entries, {len(mine)} bugs")
        lines += [f"  {len(bug.programs):5d}  {bug.label()}" for bug in mine]
    return lines


def main(argv: list[str]) -> int:
    from e2e.stablehlo_testdata.register import corpus_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--run", action="store_true", help="run the representatives with --reduce-xfailed")
    parser.add_argument("--table", metavar="REPORTS", help="the table of a --run already made")
    parser.add_argument("--reports-dir", default="reports/testdata-bugs", help="with --run: where (one dir per config)")
    parser.add_argument("--dir", help="the corpus (default: $STABLEHLO_TESTDATA, else the shared copy)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="with --run: which executors")
    args, pytest_args = parser.parse_known_args(argv)
    corpus = Path(args.dir) if args.dir else corpus_dir()
    if corpus is None:
        print("no StableHLO testdata: pass --dir DIR or set $STABLEHLO_TESTDATA", file=sys.stderr)
        return 2
    bugs = recorded_bugs(corpus)
    if not (args.run or args.table):
        print("\n".join(grouping(bugs)))
        return 0
    reports = Path(args.table or args.reports_dir).resolve()
    if args.run:
        for config in args.configs.split(","):
            tests = [representative(bug, corpus) for bug in bugs if bug.config == config]
            seconds = run_executor(config, tests, reports, corpus.resolve(), pytest_args)
            print(f"{config}: {len(tests)} representatives in {seconds:.0f} s", flush=True)
    print("\n".join(table(bugs, reports, corpus)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
