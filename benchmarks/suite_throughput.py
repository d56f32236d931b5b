"""Suite throughput and per-pair overhead, as ratios measured in one run.

    python benchmarks/suite_throughput.py [--tests 30] [--configs linalg,tosa,stablehlo]

For a sample of tests (every k-th registered test, sorted by name), runs every
(test, config) pair four ways in this process:
  hosted     the suite's way: a test host process per test builds the module, runs
             the golden trace and then every config itself, the FX export / import /
             torch-backend shared by the test's configs;
  isolated   golden in this process, each pair in a forked child (a fork per pair, the
             suite's way until the hosts ran their configs themselves);
  in-process the same without forking (what isolation costs);
  unshared   isolated, but every config exports and imports the test again
             (what sharing the frontend saves).
and reports pairs per second, the mean time per pair, and the ratios.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from e2e.configs import load_config  # noqa: E402
from e2e.framework.host import TestHost  # noqa: E402
from e2e.framework.isolation import Limits  # noqa: E402
from e2e.framework.prepared import PreparedCache  # noqa: E402
from e2e.framework.registry import GLOBAL_TEST_REGISTRY  # noqa: E402
from e2e.framework.runner import run_pair, warm_up  # noqa: E402
from e2e.framework.suite_files import load_suite  # noqa: E402

LIMITS = Limits(300, None)


def suite_tests() -> list[str]:
    """This checkout's suite, every test by name."""
    return sorted(
        name for file in load_suite([ROOT / "e2e" / "test_suite"], isolate=False).values() for name in file.tests
    )


def run_hosted(names, configs) -> tuple[float, float, int]:
    """(seconds in all, seconds until hosts were ready, passed pairs)."""
    golden_seconds, passed = 0.0, 0
    by_name = {config.name: config for config in configs}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as reports:
        for name in names:
            t = time.perf_counter()
            host = TestHost(
                GLOBAL_TEST_REGISTRY[name],
                shape_mode="annotated",
                config_loader=by_name.__getitem__,
                golden_limits=LIMITS,
            )
            golden_seconds += time.perf_counter() - t
            try:
                passed += sum(host.run(c.name, pathlib.Path(reports), LIMITS).passed for c in configs)
            finally:
                host.close()
    return time.perf_counter() - start, golden_seconds, passed


def run_mode(names, configs, *, isolate: bool, share: bool) -> tuple[float, float, int]:
    """(seconds in all, seconds in golden traces, passed pairs)."""
    cache = PreparedCache()
    golden_seconds = 0.0
    passed = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as reports:
        for name in names:
            t = time.perf_counter()
            prepared = cache.get(GLOBAL_TEST_REGISTRY[name])
            golden_seconds += time.perf_counter() - t
            for config in configs:
                if not share:
                    prepared.shared.clear()
                result = run_pair(prepared, config, reports_dir=pathlib.Path(reports), limits=LIMITS, isolate=isolate)
                passed += result.passed
    return time.perf_counter() - start, golden_seconds, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=30, help="how many tests to sample")
    parser.add_argument("--configs", default="linalg,tosa,stablehlo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    all_names = suite_tests()
    step = max(1, len(all_names) // args.tests)
    names = all_names[::step][: args.tests]
    configs = [load_config(c) for c in args.configs.split(",")]
    pairs = len(names) * len(configs)
    t = time.perf_counter()
    for config in configs:
        warm_up(config)
    print(f"warm-up (once per process): {time.perf_counter() - t:.2f} s")
    print(f"{len(names)} tests x {len(configs)} configs = {pairs} pairs\n")
    modes = {
        "hosted": None,
        "isolated": dict(isolate=True, share=True),
        "in-process": dict(isolate=False, share=True),
        "unshared": dict(isolate=True, share=False),
    }
    seconds = {}
    for mode, options in modes.items():
        total, golden, passed = run_hosted(names, configs) if options is None else run_mode(names, configs, **options)
        seconds[mode] = total
        print(
            f"{mode:>11}: {total:6.1f} s, {pairs / total:5.2f} pairs/s, {1000 * total / pairs:6.0f} ms/pair "
            f"(golden {1000 * golden / len(names):.0f} ms/test), {passed}/{pairs} passed"
        )
    print()
    print(f"isolation overhead (hosted / in-process): {seconds['hosted'] / seconds['in-process']:.2f}x")
    print(f"test hosts vs a fork per pair (hosted / isolated): {seconds['hosted'] / seconds['isolated']:.2f}x")
    print(f"frontend sharing speed-up (unshared / isolated): {seconds['unshared'] / seconds['isolated']:.2f}x")


if __name__ == "__main__":
    main()
