"""The `eager` config's summed pair time on a few suite files: before (a base checkout),
without the program cache, with it cold (empty) and warm (a second run), as ratios in one run.

    python benchmarks/eager_cache.py [--rounds 2] [--base /path/to/base/worktree]
                                     [FILE ...]    # default: matmul, elementwise_binary, norm

Each variant is `python -m pytest FILES --config eager -p no:xdist --no-result-cache` in a
new process; the variants take turns round by round, so a drift in the machine's load
reaches them alike. A variant's figure is the sum of its pairs' durations (results.json)
and the command's wall time; medians over the rounds are printed, with each variant's
ratio to the first. Every variant's verdicts are compared with the first's
(`python -m e2e.tools.diff`): a changed outcome or signature is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("e2e/test_suite/matmul.py", "e2e/test_suite/elementwise_binary.py", "e2e/test_suite/norm.py")


def _run(checkout: Path, files: list[str], cache_dir: Path, reports: Path, extra: list[str]) -> tuple[float, float]:
    """(summed pair seconds, wall seconds) of one run of the eager config on `files`."""
    command = [sys.executable, "-m", "pytest", *files, "--config", "eager", "-p", "no:xdist", "-q"]
    command += ["--no-result-cache", "--reports-dir", str(reports), "-o", f"cache_dir={cache_dir}", *extra]
    start = time.monotonic()
    done = subprocess.run(command, cwd=checkout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    results = json.loads((reports / "results.json").read_text())
    return sum(result["duration"] for result in results), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(FILES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base", type=Path, help="a checkout of the commit to compare with (a git worktree)")
    args = parser.parse_args()
    variants: dict[str, tuple[Path, list[str]]] = {}
    if args.base is not None:
        variants["base"] = (args.base, [])
    variants["no program cache"] = (ROOT, ["--no-program-cache"])
    variants["program cache, cold"] = (ROOT, [])
    variants["program cache, warm"] = (ROOT, [])
    pairs: dict[str, list[float]] = {name: [] for name in variants}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="eager-cache-bench-") as scratch:
        for round_ in range(args.rounds):
            shared_cache = Path(scratch) / f"cache-{round_}"  # cold fills it, warm reads it
            for name, (checkout, extra) in variants.items():
                cache = shared_cache if name.startswith("program cache") else Path(scratch) / f"cache-{name}-{round_}"
                reports = Path(scratch) / f"reports-{name}-{round_}".replace(" ", "-").replace(",", "")
                summed, wall = _run(checkout, args.files, cache, reports, extra)
                pairs[name].append(summed)
                walls[name].append(wall)
                first = Path(scratch) / f"reports-{next(iter(variants))}-{round_}".replace(" ", "-").replace(",", "")
                if reports != first:
                    diff = subprocess.run(
                        [sys.executable, "-m", "e2e.tools.diff", str(first), str(reports)],
                        cwd=ROOT,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    last = diff.stdout.strip().splitlines()[-1] if diff.stdout.strip() else "(no output)"
                    print(f"round {round_ + 1}, {name}: {last}", flush=True)
    print(f"{args.rounds} rounds, taking turns; files: {' '.join(args.files)}")
    reference = next(iter(variants))
    print(f"{'variant':<22} {'pairs s':>8} {'wall s':>7} {'pairs / ' + reference:>24}")
    base_pairs = statistics.median(pairs[reference])
    for name in variants:
        median = statistics.median(pairs[name])
        print(f"{name:<22} {median:8.2f} {statistics.median(walls[name]):7.1f} {median / base_pairs:24.3f}")


if __name__ == "__main__":
    main()
