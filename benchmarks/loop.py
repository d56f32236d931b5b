"""The compiler engineer's loop, as ratios to a bare `import torch, torch_mlir.fx`, in one run.

    python benchmarks/loop.py [--runs 5] [--pair e2e/test_suite/matmul.py::MmModule_basic::linalg]
                              [--test MmModule_basic]

Each command is a new process, as the engineer types it, and the commands take turns
(bare, pair, ..., bare, pair, ...) so that a drift in the machine's speed reaches all of
them alike. The ratio of each to the bare import is taken run by run; medians are printed.

  bare           python -c "import torch, torch_mlir.fx": the floor of any command here
  pair, first    one pair with no cache at all (--no-result-cache --no-frontend-cache):
                 the first run of a test, torch.export's one-time initialization included
  pair, rerun    one pair after an edit to the compiler (--no-result-cache --no-program-cache:
                 an edit to compiler/ invalidates both; the frontend cache holds the test's
                 capture): the loop of someone fixing a lowering
  test, rerun    one test on every default config (`pytest e2e -k TEST`), the same way
  test, first    the same with no cache

Everything runs with a cache directory of its own (primed once, before the timed runs,
by a run of each command) and without xdist.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands(pair: str, test: str, cache_dir: str, reports: str) -> dict[str, list[str]]:
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-o", f"cache_dir={cache_dir}"]
    pytest += ["--reports-dir", reports, "--no-result-cache"]
    return {
        "bare": [sys.executable, "-c", "import torch, torch_mlir.fx"],
        "pair, first": [*pytest, pair, "--no-frontend-cache", "--no-program-cache"],
        "pair, rerun": [*pytest, pair, "--no-program-cache"],
        "test, first": [*pytest, "e2e", "-k", test, "--no-frontend-cache", "--no-program-cache"],
        "test, rerun": [*pytest, "e2e", "-k", test, "--no-program-cache"],
    }


def _timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the command and the children it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: an xfail that passed, say; anything else is broken
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pair", default="e2e/test_suite/matmul.py::MmModule_basic::linalg")
    parser.add_argument("--test", default="MmModule_basic")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loop-bench-") as scratch:
        commands = _commands(args.pair, args.test, f"{scratch}/cache", f"{scratch}/reports")
        for command in commands.values():  # primes the probes and the frontend cache
            _timed(command)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                wall, cpu = _timed(command)
                walls[name].append(wall)
                cpus[name].append(cpu)
    print(f"{args.runs} runs each, taking turns; load average at the end {os.getloadavg()[0]:.1f}")
    print(f"{'command':<14} {'wall s':>7} {'cpu s':>7} {'wall / bare':>12} {'cpu / bare':>11}")
    for name in commands:
        wall_ratio = statistics.median(w / b for w, b in zip(walls[name], walls["bare"]))
        cpu_ratio = statistics.median(c / b for c, b in zip(cpus[name], cpus["bare"]))
        print(
            f"{name:<14} {statistics.median(walls[name]):7.2f} {statistics.median(cpus[name]):7.2f} "
            f"{wall_ratio:11.2f}x {cpu_ratio:10.2f}x"
        )


if __name__ == "__main__":
    main()
