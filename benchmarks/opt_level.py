"""What the ExecutionEngine's opt level costs and buys: JIT compile time vs run time.

    python benchmarks/opt_level.py SUITE_DIR [--every 40] [--also Multinomial] [--timeout 60]

For a sample of the tests SUITE_DIR registers (every k-th by name, plus the names
matching `--also`), lowers each test once to LLVM on linalg (static shapes, the golden
inputs), then, in a forked child per opt level (0, 1, 2), measures
  jit    its compilation from torch backend IR (the pipelines, then building the
         ExecutionEngine, which JIT-compiles it) and the first call, minus a warm call
  run    a warm call (what every later call costs)
and O0 once more with the default level's code generator (`O0/cg2`: what MLIR's C API
compiles with at every opt level, before `compiler.replay_runtime.codegen`),
and the largest static tensor (elements) in the torch-backend IR, the feature the
RefBackend's opt-level policy reads (`compiler.refbackend.opt_level_for`).
Prints one row per test and the totals per level.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler import pipelines  # noqa: E402
from compiler.backend_compile import compile_torch_backend_ir  # noqa: E402
from compiler.frontends.fx import fx_to_torch_backend_ir  # noqa: E402
from compiler.refbackend import largest_tensor_elements  # noqa: E402
from compiler.replay_runtime import codegen  # noqa: E402
from compiler.stages import StageError  # noqa: E402
from e2e.configs.pipeline import tensor_leaves  # noqa: E402
from e2e.framework import isolation  # noqa: E402
from e2e.framework.prepared import prepare  # noqa: E402
from e2e.framework.registry import GLOBAL_TEST_REGISTRY  # noqa: E402
from e2e.framework.suite_files import load_suite  # noqa: E402

# (label, opt level, code generation at O0's choices when the level is 0)
LEVELS = (("O0", 0, True), ("O0/cg2", 0, False), ("O1", 1, True), ("O2", 2, True))


def suite_tests(directory: pathlib.Path) -> list[str]:
    """The tests `directory` registers, by name; files that do not import are skipped
    (torchvision, custom ops: not this benchmark's business)."""
    names = []
    for file in load_suite([directory], isolate=False).values():
        if file.broken is not None or file.skip_reason:
            reason = file.skip_reason or file.broken.signature
            print(f"skipped {file.path.name}: {reason}", file=sys.stderr)
        names += file.tests
    return sorted(names)


def torch_backend_programs(names: list[str]):
    """(name, torch backend IR for linalg, tensor inputs) of each test's first forward call,
    skipping tests broken on torch and programs that do not reach the backend contract."""
    legal = pipelines.BACKEND_LEGAL_OPS.get("linalg", ())
    for name in names:
        prepared = prepare(GLOBAL_TEST_REGISTRY[name])
        if prepared.golden_error:
            continue
        inputs = prepared.first_call("forward")
        try:
            torch_ir, _ = fx_to_torch_backend_ir(prepared.module, inputs, backend_legal_ops=legal)
        except StageError:
            continue
        yield name, torch_ir, tensor_leaves(inputs)


def measure(torch_ir: str, inputs, level: int, o0_codegen: bool) -> tuple[float, float]:
    """(compile seconds, warm run seconds) of one program at one opt level, in a forked child
    (without `o0_codegen`, the child's O0 is the default level's code generation)."""
    if not o0_codegen:
        codegen.O0_CODEGEN = codegen.DEFAULT_CODEGEN
        codegen._level = None  # whatever the parent set: the next engine sets its level again
    start = time.perf_counter()
    program = compile_torch_backend_ir(torch_ir, "linalg", opt_level=level)
    program(*inputs)
    first = time.perf_counter()
    program(*inputs)
    warm = time.perf_counter() - first
    return (first - start) - warm, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite_dir", type=pathlib.Path)
    parser.add_argument("--every", type=int, default=40, help="take every k-th test by name (default 40)")
    parser.add_argument("--also", default="Multinomial", help="regex of test names always included")
    parser.add_argument("--timeout", type=float, default=60.0, help="per (test, level) child, seconds")
    args = parser.parse_args()
    names = suite_tests(args.suite_dir)
    sample = sorted(set(names[:: args.every]) | {n for n in names if re.search(args.also, n)})
    totals = {label: [0.0, 0.0] for label, _, _ in LEVELS}
    timed_out = {label: [] for label, _, _ in LEVELS}
    print(f"{'test':50} {'elements':>9} " + " ".join(f"{'jit ' + l:>9} {'run ' + l:>9}" for l, _, _ in LEVELS))
    for name, torch_ir, inputs in torch_backend_programs(sample):
        row = []
        for _, level, o0_codegen in LEVELS:
            outcome = isolation.run_forked(lambda: measure(torch_ir, inputs, level, o0_codegen), args.timeout)
            if isinstance(outcome, tuple):
                row.append(outcome)
            elif isinstance(outcome, isolation.TimedOut):
                row.append((float("nan"), float("inf")))
            else:
                row.append((float("nan"), float("nan")))
        if any(r != r for _, r in row):  # a level failed to compile or run: not comparable
            continue
        for (label, _, _), (jit, run) in zip(LEVELS, row):
            if run == float("inf"):
                timed_out[label].append(name)
                continue
            totals[label][0] += jit
            totals[label][1] += run
        cells = " ".join(f"{jit * 1000:9.1f} {run * 1000:9.1f}" for jit, run in row)
        print(f"{name[:50]:50} {largest_tensor_elements(torch_ir):9d} {cells}", flush=True)
    print(f"\ntotals over the tests that finished (ms); timed out after {args.timeout:.0f} s:")
    for label, (jit, run) in totals.items():
        print(
            f"  {label:6}: jit {jit * 1000:10.0f}  run {run * 1000:10.0f}  sum {(jit + run) * 1000:10.0f}"
            f"  timed out: {', '.join(timed_out[label]) or 'none'}"
        )


if __name__ == "__main__":
    main()
