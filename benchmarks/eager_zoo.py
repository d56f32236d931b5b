"""Eager mode on the model zoo: every model end to end, op by op, with fallbacks.

    python benchmarks/eager_zoo.py                  # every zoo model
    python benchmarks/eager_zoo.py -k Llama -k Gru  # names containing any of these
    python benchmarks/eager_zoo.py --gpt2-small     # GPT-2 small (124M, transformers' GPT2Config defaults), seq 128
    python benchmarks/eager_zoo.py -k Cnn --opt-level 0 --repeats 20
    E2E_JIT_TARGET=host python benchmarks/eager_zoo.py --gpt2-small   # this CPU's vectors and FMA

For each model (e2e/test_suite/zoo_*.py) at its static shape, at one thread: the
forward on native torch, then in eager mode: the first run (compiles every op
signature), then `--repeats` steady runs (all cache hits) interleaved with native runs,
so both see the same machine load; the ratio is of the medians. Prints whether eager
matches native, the compiled / fallback / native-by-design call counts (a fallback ran
on PyTorch: counted, never as compiled), the times, and at the end every op that fell
back, with its reason. `--opt-level` is the ExecutionEngine's for every op (2, the
session's default; `policy`: O2 for ops on a million elements or more, else O0).
Exits 1 if a model does not run or does not match native.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from compiler.frontends.eager_mode import EagerSession, eager_mode, from_eager, to_eager  # noqa: E402
from compiler.replay_runtime.target import jit_target  # noqa: E402
from e2e.framework import TestUtils, Tolerance  # noqa: E402
from e2e.framework.compare import compare_traces  # noqa: E402
from e2e.framework.suite_files import load_suite  # noqa: E402
from e2e.framework.trace import TraceItem  # noqa: E402
from e2e.test_suite.zoo_common import TEXT_DIMS, HfText, ZooModel, text_inputs  # noqa: E402


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


def gpt2_small() -> ZooModel:
    """GPT-2 small: `GPT2Config()` defaults (124M parameters, 12 layers, hidden 768), random
    weights, batch 1, sequence 128, with the attention a user gets (transformers' default,
    `scaled_dot_product_attention`)."""
    return ZooModel(
        "Gpt2Small",
        lambda: HfText("GPT2Config", "GPT2Model"),
        text_inputs,
        TEXT_DIMS,
        static_shape=(1, 128),
        tolerance=Tolerance(rtol=1e-3, atol=1e-3),  # 12 layers of float32 rounding
    )


def run_model(model, repeats: int, opt_level: int | None) -> tuple[bool, EagerSession, str]:
    module = model.factory()
    inputs = list(model.inputs(TestUtils(seed=0), *model.static_shape))
    session = EagerSession(opt_level=opt_level)
    eager_module = to_eager(copy.deepcopy(module), session)

    def run_eager():
        with eager_mode(session):
            return from_eager(eager_module(*inputs))

    with torch.no_grad():
        native_outputs, _ = timed(lambda: module(*inputs))  # PyTorch's own first-call warm-up
        first, first_seconds = timed(run_eager)
        native_times, eager_times = [], []
        for _ in range(repeats):
            native_times.append(timed(lambda: module(*inputs))[1])
            steady, seconds = timed(run_eager)
            eager_times.append(seconds)
    native_seconds, steady_seconds = statistics.median(native_times), statistics.median(eager_times)
    mismatch = compare_traces(
        [TraceItem("forward", inputs, native_outputs)], [TraceItem("forward", inputs, steady)], model.tolerance
    ) or compare_traces(
        [TraceItem("forward", inputs, native_outputs)], [TraceItem("forward", inputs, first)], model.tolerance
    )
    report = session.report
    compiled = sum(report.compiled_calls.values())
    fallback = sum(report.fallback_calls.values())
    native = sum(report.native_calls.values())
    line = (
        f"{model.name:<20} {'match' if mismatch is None else 'MISMATCH':<9} {compiled:>8} {fallback:>8} {native:>6}"
        f"   {first_seconds:7.2f} s {steady_seconds * 1e3:10.1f} ms {native_seconds * 1e3:8.2f} ms"
        f" {steady_seconds / native_seconds:8.1f}x"
    )
    if mismatch is not None:
        line += f"\n    {mismatch}"
    return mismatch is None, session, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", action="append", default=[], help="run models whose name contains this")
    parser.add_argument("--gpt2-small", action="store_true", help="GPT-2 small (124M) only, at sequence 128")
    parser.add_argument("--repeats", type=int, default=5, help="steady runs of each, interleaved")
    parser.add_argument("--opt-level", default="2", choices=("0", "1", "2", "3", "policy"))
    options = parser.parse_args()
    opt_level = None if options.opt_level == "policy" else int(options.opt_level)
    torch.set_num_threads(1)
    if options.gpt2_small:
        models = [gpt2_small()]
    else:
        models = [m for m in load_zoo() if not options.k or any(k.lower() in m.name.lower() for k in options.k)]
    print(
        f"opt level {options.opt_level}, JIT target {jit_target().name} (E2E_JIT_TARGET);"
        f" steady: median of {options.repeats} runs, interleaved with native"
    )
    print(
        f"{'model':<20} {'result':<9} {'compiled':>8} {'fallback':>8} {'native':>6}"
        f"   {'1st run':>9} {'steady':>13} {'native':>11} {'ratio':>9}"
    )
    failures, fallbacks = 0, {}
    for model in models:
        try:
            ok, session, line = run_model(model, options.repeats, opt_level)
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
