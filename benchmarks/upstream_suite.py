"""Run a test_suite directory in upstream torch-mlir's form through the FX configs.

    python benchmarks/upstream_suite.py PATH_TO_TEST_SUITE_DIR
        [--configs linalg,tosa,stablehlo] [--modes static,annotated] [-n 2] [-k EXPR]
        [--reports-dir DIR] [--timeout SECONDS]

For each shape mode, runs pytest in a subprocess (`--suite-dir PATH --config ... --shapes
MODE -n 2 --no-reduce`, the project's xfail sets left out), reads its `results.json`, and
prints per config: tests collected, passed, failed by stage, the ten most common
failure signatures, the files that did not import, wall time and peak memory.

When upstream's `xfail_sets.py` lies beside the suite (`../../../e2e_testing/` from a
checkout's test_suite directory, or `--xfail-sets FILE`), each config is also compared
with what upstream expects, in the shape mode upstream's config exports with (static for
the FX configs, annotated for `onnx`): a test upstream expects to pass is one in neither
the config's FX_IMPORTER*_XFAIL_SET (ONNX_XFAIL_SET) nor its crashing set. The file is read with `ast`, not
imported (it imports upstream's package).
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# config -> (upstream's expected-failure set, upstream's crashing set)
UPSTREAM_SETS = {
    "linalg": ("FX_IMPORTER_XFAIL_SET", "FX_IMPORTER_CRASHING_SET"),
    "tosa": ("FX_IMPORTER_TOSA_XFAIL_SET", "FX_IMPORTER_TOSA_CRASHING_SET"),
    "stablehlo": ("FX_IMPORTER_STABLEHLO_XFAIL_SET", "FX_IMPORTER_STABLEHLO_CRASHING_SET"),
    "onnx": ("ONNX_XFAIL_SET", "ONNX_CRASHING_SET"),
}


@dataclass
class ModeRun:
    mode: str
    rows: list[dict]
    wall: float
    broken_files: list[str]
    peak_memory: str  # the plugin's "peak memory per worker" line
    returncode: int
    log: Path


# --- running -----------------------------------------------------------------------


def pytest_command(
    suite: Path, configs: str, mode: str, args: argparse.Namespace, reports: Path, xfails: Path
) -> list[str]:
    command = [sys.executable, "-m", "pytest", str(suite)]
    if (ROOT / "conftest.py").exists():  # the plugin as a root conftest (else its entry point loads it)
        command += ["-p", "conftest"]
    # `-p no:python`: the suite's __init__.py must not be imported as a package of tests.
    # `-v`: one line per finished pair in the log, so a long run can be read while it goes.
    command += ["-p", "no:python", "-p", "no:cacheprovider", "-v"]
    command += ["--suite-dir", str(suite), "--xfail-dir", str(xfails), "--config", configs, "--shapes", mode]
    command += ["--no-reduce", "--reports-dir", str(reports), "-n", str(args.n)]
    if args.timeout:
        command += ["--timeout", str(args.timeout)]
    if args.k:
        command += ["-k", args.k]
    return command


def run_mode(suite: Path, mode: str, args: argparse.Namespace) -> ModeRun:
    reports = Path(args.reports_dir) / mode
    reports.mkdir(parents=True, exist_ok=True)
    xfails = Path(tempfile.mkdtemp(prefix="no-xfails-"))  # the project's xfail sets name other tests
    log = reports / "pytest.log"
    command = pytest_command(suite, args.configs, mode, args, reports, xfails)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    print(f"[{mode}] {' '.join(command)}", flush=True)
    start = time.monotonic()
    with log.open("w") as out:
        completed = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    text = log.read_text(errors="replace")
    results = reports / "results.json"
    rows = read_rows(results) if results.exists() else []
    broken = sorted(set(re.findall(r"(\w+\.py)::import", text)))
    peak = next((line for line in text.splitlines() if line.startswith("peak memory")), "peak memory: not reported")
    (reports / "run.json").write_text(json.dumps({"wall": wall, "returncode": completed.returncode}))
    return ModeRun(mode, rows, wall, broken, peak, completed.returncode, log)


def reread_mode(mode: str, args: argparse.Namespace) -> ModeRun | None:
    """The last run of `mode` in --reports-dir, without running anything."""
    reports = Path(args.reports_dir) / mode
    log = reports / "pytest.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    if not (reports / "results.json").exists():  # unfinished: what the log says so far
        return (
            ModeRun(mode, rows_from_log(text), float("nan"), [], "peak memory: run unfinished", -1, log)
            if text
            else None
        )
    peak = next((line for line in text.splitlines() if line.startswith("peak memory")), "peak memory: not reported")
    broken = sorted(set(re.findall(r"(\w+\.py)::import", text)))
    run = json.loads((reports / "run.json").read_text()) if (reports / "run.json").exists() else {}
    return ModeRun(
        mode,
        read_rows(reports / "results.json"),
        run.get("wall", float("nan")),
        broken,
        peak,
        run.get("returncode", 0),
        log,
    )


def read_rows(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return data["results"] if isinstance(data, dict) else data


_LOG_LINE = re.compile(r" (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) \S*::(\w+)\[(\w+)\]")


def rows_from_log(text: str) -> list[dict]:
    """Outcomes of the pairs a (possibly unfinished) `-v` run has logged so far."""
    rows = {}
    for status, test, config in _LOG_LINE.findall(text):
        outcome = "pass" if status in ("PASSED", "XPASS") else "skip" if status == "SKIPPED" else "fail"
        rows[test, config] = {"test": test, "config": config, "outcome": outcome, "signature": None}
    return list(rows.values())


# --- upstream's expectations -------------------------------------------------------


class SetsReader:
    """Evaluates the set algebra of xfail_sets.py: literals, names, |, -, &, version ifs."""

    OPERATORS = {ast.BitOr: operator.or_, ast.Sub: operator.sub, ast.BitAnd: operator.and_}
    COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}

    def __init__(self, suite: Path):
        import torch
        from packaging import version

        self.suite = suite
        self.torch_version = version.parse(torch.__version__.split("+")[0])
        self.parse_version = version.parse
        self.names: dict[str, set[str]] = {}

    def read(self, path: Path) -> dict[str, set[str]]:
        self.run(ast.parse(path.read_text()).body)
        return self.names

    def run(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            try:
                self.statement(statement)
            except (KeyError, TypeError, ValueError):
                pass  # a set this reader cannot evaluate; one it needs fails loudly later

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            value = self.value(node.value)
            for target in node.targets:
                self.names[target.id] = value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self.names[node.target.id] = self.OPERATORS[type(node.op)](
                self.names[node.target.id], self.value(node.value)
            )
        elif isinstance(node, ast.If):
            self.run(node.body if self.condition(node.test) else node.orelse)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("test_suite"):
            init = self.suite / "__init__.py"
            if init.exists():
                self.run(ast.parse(init.read_text()).body)

    def value(self, node: ast.expr) -> set[str]:
        if isinstance(node, ast.Set):
            return {element.value for element in node.elts if isinstance(element, ast.Constant)}
        if isinstance(node, ast.Name):
            return set(self.names[node.id])
        if isinstance(node, ast.BinOp):
            return self.OPERATORS[type(node.op)](self.value(node.left), self.value(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set" and not node.args:
            return set()
        raise ValueError(ast.dump(node))

    def condition(self, node: ast.expr) -> bool:
        """`torch_version_for_comparison() <op> version.parse("x")`; anything else is False."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in self.COMPARE:
            left, right = self.version(node.left), self.version(node.comparators[0])
            if left is not None and right is not None:
                return self.COMPARE[type(node.ops[0])](left, right)
        return False

    def version(self, node: ast.expr):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "torch_version_for_comparison":
            return self.torch_version
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "parse" and node.args:
            return self.parse_version(node.args[0].value)
        return None


# The shapes upstream's configs export with: its FX configs the example inputs' (static),
# its ONNX config `annotate_args`' -1 dims as dynamic dims (this suite's `annotated`).
UPSTREAM_SHAPES = {"onnx": "annotated"}


def upstream_expected_failures(xfail_sets: Path, suite: Path) -> dict[str, set[str]]:
    names = SetsReader(suite).read(xfail_sets)
    return {config: names[xfail] | names[crashing] for config, (xfail, crashing) in UPSTREAM_SETS.items()}


@dataclass
class Agreement:
    both_pass: list[str] = field(default_factory=list)
    both_fail: list[str] = field(default_factory=list)
    only_here: list[str] = field(default_factory=list)  # passes here, upstream expects failure
    only_upstream: list[str] = field(default_factory=list)  # upstream expects a pass, fails here

    @property
    def total(self) -> int:
        return len(self.both_pass) + len(self.both_fail) + len(self.only_here) + len(self.only_upstream)

    @property
    def ratio(self) -> float:
        return (len(self.both_pass) + len(self.both_fail)) / self.total if self.total else float("nan")


def agreement(rows: list[dict], upstream_fails: set[str]) -> Agreement:
    result = Agreement()
    for row in sorted(rows, key=lambda r: r["test"]):
        here, there = row["outcome"] == "pass", row["test"] not in upstream_fails
        bucket = {
            (True, True): result.both_pass,
            (False, False): result.both_fail,
            (True, False): result.only_here,
            (False, True): result.only_upstream,
        }[(here, there)]
        bucket.append(row["test"])
    return result


# --- printing ------------------------------------------------------------------------


def print_mode(run: ModeRun, configs: list[str]) -> None:
    print(f"\n=== shape mode {run.mode}: wall {run.wall:.0f} s, pytest exit {run.returncode}, log {run.log}")
    print(f"    {run.peak_memory}")
    if run.broken_files:
        print(f"    files that did not import: {', '.join(run.broken_files)}")
    for config in configs:
        rows = [r for r in run.rows if r["config"] == config]
        outcomes = Counter(r["outcome"] for r in rows)
        stages = Counter(r.get("stage") or "?" for r in rows if r["outcome"] != "pass")
        pair_time = sum(r.get("duration", 0.0) for r in rows)
        print(
            f"\n  {config}: {len(rows)} collected, {outcomes['pass']} passed, "
            f"{len(rows) - outcomes['pass']} not ({', '.join(f'{n} {k}' for k, n in outcomes.most_common() if k != 'pass')})"
            f"; pair time {pair_time:.0f} s"
        )
        print(f"    failed by stage: {', '.join(f'{s} {n}' for s, n in stages.most_common())}")
        signatures = Counter(r.get("signature") or "?" for r in rows if r["outcome"] != "pass")
        for signature, count in signatures.most_common(10):
            print(f"    {count:5d}  {signature[:150]}")


def upstream_framework_failures(path: Path) -> tuple[dict[str, set[str]], dict[str, dict[str, str]]]:
    """From `benchmarks/upstream_framework.py --out FILE`: per config, the tests upstream's
    own framework does not pass on this machine, and its first error line per test."""
    data = json.loads(path.read_text())["results"]
    failures = {c: {t for t, row in rows.items() if row["outcome"] != "pass"} for c, rows in data.items()}
    errors = {
        c: {t: f"{row['outcome']}: {row['error']}" for t, row in rows.items() if row["outcome"] != "pass"}
        for c, rows in data.items()
    }
    return failures, errors


def print_agreement(
    run: ModeRun,
    configs: list[str],
    expected_failures: dict[str, set[str]],
    verbose: bool,
    reference: str = "upstream's xfail sets",
    upstream_errors: dict[str, dict[str, str]] | None = None,
    judged: dict[str, set[str]] | None = None,
) -> None:
    """`judged`: per config, the tests the reference judged (default: all)."""
    print(f"\n=== agreement with {reference} ({run.mode} shapes)")
    for config in configs:
        if config not in expected_failures:
            continue
        known = (judged or {}).get(config)
        rows = [r for r in run.rows if r["config"] == config and (known is None or r["test"] in known)]
        result = agreement(rows, expected_failures[config])
        print(
            f"  {config}: {result.ratio:.2%} of {result.total} agree: both pass {len(result.both_pass)}, "
            f"both fail {len(result.both_fail)}, only here {len(result.only_here)}, "
            f"only upstream {len(result.only_upstream)}"
        )
        signature = {r["test"]: r.get("signature") for r in run.rows if r["config"] == config}
        for label, names in (
            ("only here (passes here, upstream expects failure)", result.only_here),
            ("only upstream (upstream passes, fails here)", result.only_upstream),
        ):
            if names:
                print(f"    {label}:")
                for name in names if verbose else names[:40]:
                    why = (upstream_errors or {}).get(config, {}).get(name)
                    line = f"      {name}  [{signature.get(name) or 'pass'}]"
                    print((line + (f"  upstream: {why}" if why else ""))[:400])
                if not verbose and len(names) > 40:
                    print(f"      ... {len(names) - 40} more (--verbose lists all)")
        if upstream_errors is not None:  # the differences by cause: upstream's error, or our signature
            causes = Counter(_normalized(upstream_errors.get(config, {}).get(n, "?")) for n in result.only_here)
            causes.update(f"fails here: {signature.get(n)}" for n in result.only_upstream)
            print("    differences by cause:")
            for cause, count in causes.most_common():
                print(f"      {count:4d}  {cause[:170]}")


def _normalized(error: str) -> str:
    """An upstream error line without the numbers that vary from test to test."""
    return "upstream " + re.sub(r"0x[0-9a-f]+|\d+", "N", error)


def print_dynamic_only(static: ModeRun, annotated: ModeRun, configs: list[str]) -> None:
    """The tests that pass with static shapes and fail with their annotated dynamic dims:
    the dynamic-shape bugs a static-only run (upstream's) never sees, grouped by signature."""
    print("\n=== failing only with dynamic dims (pass in static mode, fail in annotated mode)")
    passed_static = {(r["test"], r["config"]) for r in static.rows if r["outcome"] == "pass"}
    for config in configs:
        rows = [
            r
            for r in annotated.rows
            if r["config"] == config and r["outcome"] != "pass" and (r["test"], config) in passed_static
        ]
        signatures = Counter(r.get("signature") or "?" for r in rows)
        print(f"  {config}: {len(rows)} tests, {len(signatures)} signatures")
        for signature, count in signatures.most_common():
            print(f"    {count:5d}  {signature[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite_dir", type=Path)
    parser.add_argument("--configs", default="linalg,tosa,stablehlo")
    parser.add_argument("--modes", default="static,annotated")
    parser.add_argument("-n", default="2", help="pytest-xdist workers (default 2)")
    parser.add_argument("-k", default="", help="pytest -k expression")
    parser.add_argument("--timeout", type=float, default=0, help="pytest --timeout per pair (default: the plugin's)")
    parser.add_argument("--reports-dir", default=str(Path(tempfile.gettempdir()) / "upstream-suite"))
    parser.add_argument("--xfail-sets", type=Path, help="upstream's xfail_sets.py (default: found beside the suite)")
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="reread the last results in --reports-dir (an unfinished run: its log so far); run nothing",
    )
    parser.add_argument("--verbose", action="store_true", help="list every differing test")
    parser.add_argument(
        "--upstream-results",
        type=Path,
        help="compare with upstream's own framework run on this machine "
        "(benchmarks/upstream_framework.py --out FILE) instead of its xfail sets",
    )
    args = parser.parse_args()
    suite = args.suite_dir.resolve()
    if not suite.is_dir():
        parser.error(f"{suite} is not a directory of test files")
    configs = [c for c in args.configs.split(",") if c]
    xfail_sets = args.xfail_sets or suite.parent.parent.parent / "e2e_testing" / "xfail_sets.py"
    expected = upstream_expected_failures(xfail_sets, suite) if xfail_sets.exists() else None
    runs: dict[str, ModeRun] = {}
    for mode in args.modes.split(","):
        run = reread_mode(mode, args) if args.from_results else run_mode(suite, mode, args)
        if run is None:
            continue
        runs[mode] = run
        print_mode(run, configs)
        # Each config is compared in the shape mode upstream's config exports with.
        judged_here = [c for c in configs if UPSTREAM_SHAPES.get(c, "static") == mode]
        if expected is not None and judged_here:
            print_agreement(run, judged_here, expected, args.verbose)
        if args.upstream_results and judged_here:
            failures, errors = upstream_framework_failures(args.upstream_results)
            ran = {c: set(rows) for c, rows in json.loads(args.upstream_results.read_text())["results"].items()}
            print_agreement(
                run, judged_here, failures, args.verbose, "upstream's own framework on this machine", errors, ran
            )
    if "static" in runs and "annotated" in runs:
        print_dynamic_only(runs["static"], runs["annotated"], configs)
    if expected is None:
        print(f"\n(no upstream xfail_sets.py at {xfail_sets}: agreement not computed)")


if __name__ == "__main__":
    main()
