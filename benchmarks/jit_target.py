"""What compiling for a fixed JIT target costs beside compiling for the host: JIT time and run time.

    python benchmarks/jit_target.py SUITE_DIR [--every 20] [--targets host,x86-64-v2,x86-64-v3]

For a sample of the tests SUITE_DIR registers (every k-th by name), lowers each test once
to LLVM on linalg (static shapes, the golden inputs), then, in a forked child per target
(`E2E_JIT_TARGET`), measures at the RefBackend's own opt level
  jit    building the ExecutionEngine and the first call, minus a warm call
  run    the fastest of 5 warm calls
Prints one row per test and the totals per target, with each total's ratio to `host`:
ratios from one run on one machine, so load hits every column alike.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from opt_level import suite_tests, torch_backend_programs  # noqa: E402

from compiler.backend_compile import compile_torch_backend_ir  # noqa: E402
from compiler.refbackend import opt_level_for  # noqa: E402
from compiler.replay_runtime.target import ENV  # noqa: E402
from e2e.framework import isolation  # noqa: E402


def on_target(target: str, torch_ir: str, inputs, repeats: int = 5) -> tuple[float, float]:
    """(jit seconds, the fastest of `repeats` warm calls) of one program compiled for `target`."""
    os.environ[ENV] = target  # in the forked child only
    program = compile_torch_backend_ir(torch_ir, "linalg", opt_level=opt_level_for(torch_ir))
    lowered = time.perf_counter()
    program(*inputs)
    first = time.perf_counter() - lowered
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        program(*inputs)
        warm.append(time.perf_counter() - start)
    return first - min(warm), min(warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite_dir", type=pathlib.Path)
    parser.add_argument("--every", type=int, default=20, help="take every k-th test by name (default 20)")
    parser.add_argument("--targets", default="host,x86-64-v2,x86-64-v3")
    parser.add_argument("--timeout", type=float, default=60.0, help="per (test, target) child, seconds")
    args = parser.parse_args()
    targets = args.targets.split(",")
    sample = suite_tests(args.suite_dir)[:: args.every]
    totals = {target: [0.0, 0.0] for target in targets}
    print(f"{'test':50} " + " ".join(f"{'jit ' + t[-6:]:>11} {'run ' + t[-6:]:>11}" for t in targets))
    for name, torch_ir, inputs in torch_backend_programs(sample):
        row = [isolation.run_forked(lambda: on_target(target, torch_ir, inputs), args.timeout) for target in targets]
        if not all(isinstance(outcome, tuple) for outcome in row):
            continue  # a target failed to compile or run it: not comparable
        for target, (jit, run) in zip(targets, row):
            totals[target][0] += jit
            totals[target][1] += run
        print(f"{name[:50]:50} " + " ".join(f"{jit * 1000:11.1f} {run * 1000:11.1f}" for jit, run in row), flush=True)
    base_jit, base_run = totals[targets[0]]
    print(f"\ntotals (ms), and the ratio to {targets[0]}:")
    for target, (jit, run) in totals.items():
        print(
            f"  {target:10} jit {jit * 1000:9.0f} ({jit / base_jit:.2f}x)  run {run * 1000:9.0f} ({run / base_run:.2f}x)"
        )


if __name__ == "__main__":
    main()
