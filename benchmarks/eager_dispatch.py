"""Eager mode cost: per-op dispatch overhead of a cached op, and an OPT forward.

    python benchmarks/eager_dispatch.py                 # both
    python benchmarks/eager_dispatch.py --calls 5000    # more samples for (a)
    python benchmarks/eager_dispatch.py --attention sdpa

(a) `a + b` on two 4x4 float32 EagerTensors once the op is cached: median over
    `--calls` calls, interleaved call by call with native `a + b` and with the compiled
    program called directly (marshalling + ExecutionEngine, no dispatch), so all three
    see the same machine load. Goal (issue 31): at most 25 us over native.
(b) A small random-config Hugging Face OPTModel (e2e/test_suite/opt_model.py), forward
    in eager mode vs native, first run (compiles every op signature) and second run
    (all cache hits) and the median of later runs, with the report of ops compiled vs fallen back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from compiler.frontends.eager_mode import EagerSession, eager_mode, from_eager, to_eager  # noqa: E402


def median_seconds(fn, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


OVERHEAD_GOAL = 25e-6  # seconds over native per cached op (issue 31)


def interleaved_medians(fns, calls: int) -> list[float]:
    """The median time of each of `fns`, called in turn `calls` times."""
    samples = [[] for _ in fns]
    for _ in range(calls):
        for fn, times in zip(fns, samples):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return [statistics.median(times) for times in samples]


def dispatch_overhead(calls: int) -> None:
    session = EagerSession()
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    ea, eb = to_eager((a, b), session)
    ea + eb  # compile once
    (program,) = [entry.program for entry in session._cache.values()]
    eager, native, direct = interleaved_medians([lambda: ea + eb, lambda: a + b, lambda: program(a, b)], calls)
    hits = session.report.cache_hits["aten.add.Tensor"]
    overhead = eager - native
    print(f"(a) cached aten.add.Tensor on 4x4 float32, median of {calls} interleaved calls ({hits} cache hits)")
    print(f"    eager dispatch      {eager * 1e6:8.1f} us")
    print(f"    program call alone  {direct * 1e6:8.1f} us   (argument check, marshalling, ExecutionEngine)")
    print(f"    native torch        {native * 1e6:8.1f} us")
    goal = "meets" if overhead <= OVERHEAD_GOAL else "MISSES"
    print(f"    overhead vs native  {overhead * 1e6:8.1f} us per op ({eager / native:.0f}x; {goal} the 25 us goal)")
    print("    other dtypes and layouts (`a * b`, 4x4), eager - native:")
    for label, x in [
        ("bfloat16", a.to(torch.bfloat16)),
        ("int64", (a * 100).to(torch.int64)),
        ("bool", a > 0),
        ("float32 transposed", torch.randn(4, 4).t()),
        ("float32 0-d", a[0, 0].clone()),
    ]:
        y = b.to(x.dtype) if x.dim() else b[0, 0].to(x.dtype)
        ex, ey = to_eager((x, y), session)
        ex * ey  # compile once
        eager, native = interleaved_medians([lambda: ex * ey, lambda: x * y], calls)
        print(
            f"      {label:<20} {(eager - native) * 1e6:6.1f} us  (eager {eager * 1e6:5.1f}, native {native * 1e6:4.1f})"
        )
    session.close()


def opt_forward(attention: str, repeats: int) -> None:
    try:
        from e2e.framework import TestUtils
        from e2e.test_suite.opt_model import OptLastHiddenState, opt_inputs
    except ImportError as error:
        print(f"(b) skipped: {error}")
        return
    try:
        model = OptLastHiddenState(attention)
    except ImportError as error:
        print(f"(b) skipped (pip install 'transformers==5.23.*'): {error}")
        return
    inputs = opt_inputs(TestUtils(seed=0))

    def run_native():
        with torch.no_grad():
            return model(*inputs)

    def run_eager():
        with torch.no_grad(), eager_mode(session):
            return from_eager(model(*inputs))

    def timed(fn):
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result

    # Native first: its first call pays PyTorch's own warm-up.
    native_times = [timed(run_native)[0] for _ in range(2)]
    golden = run_native()
    native_times.append(median_seconds(run_native, repeats))
    session = EagerSession()
    to_eager(model, session)
    eager_times = [timed(run_eager)[0] for _ in range(2)]
    output = run_eager()
    eager_times.append(median_seconds(run_eager, repeats))
    error = (output - golden).abs().max().item()
    print(f"\n(b) OPTModel forward (hidden 32, 2 layers, 2 heads, ffn 64, seq 8, attention={attention!r})")
    labels = ("first run", "second run", f"median of {repeats}")
    for label, eager, native in zip(labels, eager_times, native_times):
        print(
            f"    {label:<13} eager {eager * 1e3:8.1f} ms   native {native * 1e3:7.1f} ms   ratio {eager / native:6.1f}x"
        )
    print(
        f"    max |eager - native| = {error:.2e}  ({'match' if torch.allclose(output, golden, atol=1e-5) else 'MISMATCH'})"
    )
    print(session.report.summary())
    session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=10, help="runs after the second, for (b)'s median")
    parser.add_argument("--attention", default="eager", choices=("eager", "sdpa"))
    parser.add_argument("--skip-opt", action="store_true")
    args = parser.parse_args()
    # One intra-op thread: the reference backend runs single-threaded, and on a shared
    # machine PyTorch's thread pool waits for a time slice on every op (~16 ms each).
    torch.set_num_threads(1)
    dispatch_overhead(args.calls)
    if not args.skip_opt:
        opt_forward(args.attention, args.repeats)


if __name__ == "__main__":
    main()
