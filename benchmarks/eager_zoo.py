"""Eager mode on the model zoo: every model end to end, op by op, with fallbacks.

    python benchmarks/eager_zoo.py                  # every zoo model
    python benchmarks/eager_zoo.py -k Llama -k Gru  # names containing any of these

For each model (e2e/test_suite/zoo_*.py) at its static shape, at one thread: the
forward on native torch, then in eager mode twice (the first run compiles every op
signature, the second hits the cache). Prints whether eager matches native, the
compiled / fallback / native-by-design call counts, first and second run time against
native, and at the end every op that fell back, with its reason. Exits 1 if a model
does not run or does not match native.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from compiler.frontends.eager import EagerSession, eager_mode, from_eager, to_eager  # noqa: E402
from e2e.framework import TestUtils  # noqa: E402
from e2e.framework.compare import compare_traces  # noqa: E402
from e2e.framework.suite_files import load_suite  # noqa: E402
from e2e.framework.trace import TraceItem  # noqa: E402


def load_zoo():
    for file in load_suite(sorted((ROOT / "e2e" / "test_suite").glob("zoo_*.py")), isolate=False).values():
        if file.broken is not None or file.skip_reason:  # e.g. transformers missing: those models are skipped
            print(f"skipping {file.path.name}: {file.skip_reason or file.broken.signature}")
    from e2e.test_suite.zoo_common import ZOO

    return ZOO


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run_model(model) -> tuple[bool, EagerSession, str]:
    module = model.factory()
    inputs = list(model.inputs(TestUtils(seed=0), *model.static_shape))
    session = EagerSession()
    eager_module = to_eager(copy.deepcopy(module), session)
    with torch.no_grad():
        native_outputs, _ = timed(lambda: module(*inputs))
        _, native_seconds = timed(lambda: module(*inputs))
        with eager_mode(session):
            first, first_seconds = timed(lambda: from_eager(eager_module(*inputs)))
            second, second_seconds = timed(lambda: from_eager(eager_module(*inputs)))
    mismatch = compare_traces(
        [TraceItem("forward", inputs, native_outputs)], [TraceItem("forward", inputs, second)], model.tolerance
    ) or compare_traces(
        [TraceItem("forward", inputs, native_outputs)], [TraceItem("forward", inputs, first)], model.tolerance
    )
    report = session.report
    compiled = sum(report.compiled_calls.values())
    fallback = sum(report.fallback_calls.values())
    native = sum(report.native_calls.values())
    line = (
        f"{model.name:<20} {'match' if mismatch is None else 'MISMATCH':<9} {compiled:>8} {fallback:>8} {native:>6}"
        f"   {first_seconds:7.2f} s {second_seconds * 1e3:8.1f} ms {native_seconds * 1e3:7.2f} ms"
        f" {second_seconds / native_seconds:7.0f}x"
    )
    if mismatch is not None:
        line += f"\n    {mismatch}"
    return mismatch is None, session, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", action="append", default=[], help="run models whose name contains this")
    options = parser.parse_args()
    torch.set_num_threads(1)
    models = [m for m in load_zoo() if not options.k or any(k.lower() in m.name.lower() for k in options.k)]
    print(
        f"{'model':<20} {'result':<9} {'compiled':>8} {'fallback':>8} {'native':>6}"
        f"   {'1st run':>9} {'2nd run':>11} {'native':>10} {'2nd/native':>8}"
    )
    failures, fallbacks = 0, {}
    for model in models:
        try:
            ok, session, line = run_model(model)
        except Exception as error:  # eager mode must run every model: this is a finding
            ok, session, line = False, None, f"{model.name:<20} ERROR    {type(error).__name__}: {error}"
        print(line, flush=True)
        failures += not ok
        if session is not None:
            for fallback in session.report.fallbacks:
                fallbacks.setdefault(fallback.op, (fallback, []))[1].append(model.name)
            session.close()
    print(f"\n{len(models) - failures}/{len(models)} models ran in eager mode and matched native")
    print(f"ops that fell back ({len(fallbacks)}), with the first reason and the models:")
    for op, (fallback, names) in sorted(fallbacks.items()):
        print(f"  {op} [{fallback.stage}] {fallback.message[:160]}\n      in {', '.join(dict.fromkeys(names))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
