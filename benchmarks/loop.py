"""The compiler engineer's loop, each command cold, as ratios to a bare import measured in the same run.

    python benchmarks/loop.py [--runs 3] [--pair e2e/test_suite/matmul.py::MmModule_basic::linalg]
                              [--test MmModule_basic] [--slice softmax.py norm.py embedding.py | --whole-suite]
                              [--edit compiler/pipelines.py] [--skip-suite]

Every command is a new process started as the engineer types it, from a copy of this
checkout in a temporary directory (so the edit below never touches the checkout), each
with caches of its own there.

(a) The one-test loop, with no cache at all (`--no-result-cache -p no:cacheprovider`: no
    result, frontend or program cache, no remembered import probe), the commands taking
    turns `--runs` times (bare, pair, test, bare, ...) so that a drift in the machine's
    speed reaches all of them alike; medians, and the ratio to the bare import run by run:

      bare   python -c "import torch, torch_mlir.fx": the floor of any command here
      pair   python -m pytest <pair> --no-result-cache -p no:cacheprovider
      test   python -m pytest e2e -k <test> --no-result-cache -p no:cacheprovider (six configs)

(b) The six-config suite on a slice of topic files (or the whole suite) as the README
    runs it (`-n 2` by default: `--workers`), one cache directory for the three runs:

      cold     nothing cached
      edit     after a real edit under compiler/ outside the frontends (a comment line
               appended to `--edit`, a file every result and program key covers; undone after)
      rebuild  after a simulated torch-mlir rebuild (`E2E_TORCH_MLIR_IDENTITY_SALT`: torch-mlir's
               identity changes in every key that holds it, as a rebuild changes it)

    each with its wall time and its ratio to the cold run, and `python -m e2e.tools.diff` of the
    cold run against each (its exit status and its changed pairs: none is the bar).

(c) Where each run's pair-seconds went (the reports' `stage_seconds`): the capture; torch-mlir's
    stages (import, torch-backend, backend, lower: what a rebuild must run again); execute and
    compare; and the rest of the pairs' time. torch-mlir's share divided by the workers is
    the floor of any rerun after a rebuild that keeps every capture, as a ratio to the cold run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from e2e.framework.results_files import load_rows  # noqa: E402
from e2e.tools.diff import compare  # noqa: E402

NO_CACHE = ["--no-result-cache", "-p", "no:cacheprovider"]
COPIED = ("compiler", "e2e", "torch_mlir_e2e_test", "pyproject.toml")


def _copy_checkout(into: Path) -> Path:
    """The project's sources (not .git, reports, caches), for commands that edit them."""
    copy = into / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "reports")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=ignore)
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s of the command and the children it waited for, its output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: an xfail that passed, say; anything else is broken
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def one_test_loop(copy: Path, scratch: Path, pair: str, test: str, runs: int) -> dict[str, list[tuple[float, float]]]:
    """(a): every command cold, taking turns; (wall, cpu) per run."""
    pytest = [sys.executable, "-m", "pytest", *NO_CACHE]  # the commands as typed, nothing turned off
    commands = {
        "bare": [sys.executable, "-c", "import torch, torch_mlir.fx"],
        "pair": [*pytest, pair, "--reports-dir", str(scratch / "reports-pair")],
        "test": [*pytest, "e2e", "-k", test, "--reports-dir", str(scratch / "reports-test")],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            wall, cpu, _ = timed(command, copy)
            times[name].append((wall, cpu))
    return times


def suite_loop(
    copy: Path, scratch: Path, paths: list[str], edit: str, workers: int
) -> dict[str, tuple[float, float, str]]:
    """(b): cold, after an edit under compiler/, after a simulated rebuild; wall, cpu, summary line."""
    cache = scratch / "suite-cache"
    runs: dict[str, tuple[float, float, str]] = {}

    def run(name: str, env: dict | None = None) -> None:
        command = [sys.executable, "-m", "pytest", "-q", *paths, "-o", f"cache_dir={cache}"]
        command += ["-n", str(workers)] if workers > 1 else []
        command += ["--reports-dir", str(scratch / f"suite-{name}")]
        wall, cpu, output = timed(command, copy, env)
        lines = [line for line in output.splitlines() if line.strip()]
        runs[name] = (wall, cpu, lines[-1] if lines else "")

    run("cold")
    edited = copy / edit
    original = edited.read_bytes()
    try:
        edited.write_bytes(original + b"\n# benchmarks/loop.py: an edit under compiler/ (undone after the run)\n")
        run("edit")
    finally:
        edited.write_bytes(original)
    run("rebuild", {**os.environ, "E2E_TORCH_MLIR_IDENTITY_SALT": f"loop-{time.time_ns()}"})
    return runs


def _diff(copy: Path, scratch: Path, new: str) -> str:
    """`python -m e2e.tools.diff` of the cold run against `new`: its exit status (0: no new failure)
    and the pairs whose verdict changed in any way (its kinds but `slower`: 0 is the bar)."""
    base, now = scratch / "suite-cold", scratch / f"suite-{new}"
    done = subprocess.run(
        [sys.executable, "-m", "e2e.tools.diff", str(base), str(now)], cwd=copy, capture_output=True, check=False
    )
    changed = Counter(c.kind for c in compare(load_rows(base)[0], load_rows(now)[0]).changes if c.kind != "slower")
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(changed.items()))
    return f"e2e.tools.diff exit {done.returncode}, {sum(changed.values())} pairs changed" + (
        f" ({kinds})" if kinds else ""
    )


# What a rebuild of torch-mlir runs again whatever is kept: its importer's parse, its
# passes (torch-backend, backend) and MLIR's lowering and JIT (lower).
TORCH_MLIR_STAGES = ("import", "torch-backend", "backend", "lower")


def stage_split(scratch: Path, name: str) -> dict[str, float]:
    """Pair-seconds of run `name` by part: capture, torch-mlir's stages, execute + compare, rest."""
    parts = dict.fromkeys(("capture", "torch-mlir", "execute", "rest"), 0.0)
    for row in load_rows(scratch / f"suite-{name}")[0]:
        stages = row.get("stage_seconds") or {}
        parts["capture"] += stages.get("capture", 0.0)
        parts["torch-mlir"] += sum(stages.get(stage, 0.0) for stage in TORCH_MLIR_STAGES)
        parts["execute"] += stages.get("execute", 0.0) + stages.get("compare", 0.0)
        parts["rest"] += max(0.0, (row.get("duration") or 0.0) - sum(stages.values()))
    return parts


def machine() -> str:
    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return f"{model or platform.processor()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="turns of the one-test loop (default 3)")
    parser.add_argument("--pair", default="e2e/test_suite/matmul.py::MmModule_basic::linalg")
    parser.add_argument("--test", default="MmModule_basic")
    parser.add_argument(
        "--slice", nargs="+", default=["softmax.py", "norm.py", "embedding.py"], help="topic files of (b)"
    )
    parser.add_argument("--whole-suite", action="store_true", help="(b) on the whole suite, not a slice")
    parser.add_argument("--edit", default="compiler/pipelines.py", help="the file (b) edits, under compiler/")
    parser.add_argument("--skip-suite", action="store_true", help="only (a)")
    parser.add_argument("--keep", type=Path, help="work in this new directory and keep it (its runs' reports)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers of (b) (default 2, as the README)")
    args = parser.parse_args()
    if not args.edit.startswith("compiler/") or args.edit.startswith("compiler/frontends/"):
        parser.error("--edit: a file under compiler/ outside the frontends")
    print(f"{machine()}; commit {commit()}; load average at the start {os.getloadavg()[0]:.1f}")
    if args.keep is not None:
        args.keep.mkdir(parents=True)
    with contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="loop-bench-") as work:
        scratch = Path(work)
        copy = _copy_checkout(scratch)
        times = one_test_loop(copy, scratch, args.pair, args.test, args.runs)
        print(f"\n(a) each command cold, no cache at all; {args.runs} turns, medians")
        print(f"{'command':<8} {'wall s':>7} {'cpu s':>7} {'wall / bare':>12} {'cpu / bare':>11}")
        for name, rows in times.items():
            wall_ratio = statistics.median(w / b for (w, _), (b, _) in zip(rows, times["bare"]))
            cpu_ratio = statistics.median(c / b for (_, c), (_, b) in zip(rows, times["bare"]))
            print(
                f"{name:<8} {statistics.median(w for w, _ in rows):7.2f} {statistics.median(c for _, c in rows):7.2f}"
                f" {wall_ratio:11.2f}x {cpu_ratio:10.2f}x"
            )
        if args.skip_suite:
            return
        paths = ["e2e"] if args.whole_suite else [f"e2e/test_suite/{name}" for name in args.slice]
        runs = suite_loop(copy, scratch, paths, args.edit, args.workers)
        print(f"\n(b) the six configs on {' '.join(paths)}, -n {args.workers}, one cache directory, in turn")
        print(f"{'run':<8} {'wall s':>7} {'cpu s':>7} {'/ cold':>7}  outcome; e2e.tools.diff against cold")
        cold = runs["cold"][0]
        for name, (wall, cpu, summary) in runs.items():
            diff = "" if name == "cold" else "; " + _diff(copy, scratch, name)
            print(f"{name:<8} {wall:7.1f} {cpu:7.1f} {wall / cold:6.2f}x  {summary}{diff}")
        print("\n(c) pair-seconds by part; the floor: torch-mlir's part over the workers, against the cold run")
        print(f"{'run':<8} {'capture':>8} {'torch-mlir':>11} {'execute':>8} {'rest':>8} {'floor':>7}")
        for name in runs:
            split = stage_split(scratch, name)
            floor = split["torch-mlir"] / args.workers / cold
            print(
                f"{name:<8} {split['capture']:8.1f} {split['torch-mlir']:11.1f} {split['execute']:8.1f}"
                f" {split['rest']:8.1f} {floor:6.2f}x"
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
