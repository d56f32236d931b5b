"""What a test needs natively: its module and golden trace on plain torch, peak memory.

    python benchmarks/native_peak.py SUITE_DIR_OR_FILE [--reports-dir DIR] [--over-mib 2048] [TEST ...]

For each named test (or, with `--reports-dir`, each test whose test host grew past
`--over-mib` during some pair of that run), builds the module and runs the golden trace
the way a test host does, in a forked child, and prints how much the child's peak
resident set grew over what it inherited. A test whose pairs need more than the memory
cap is one that torch itself needs it for, or one the compiled program inflates; this
tells which.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e.framework import isolation  # noqa: E402
from e2e.framework.isolation import MIB  # noqa: E402
from e2e.framework.prepared import prepare  # noqa: E402
from e2e.framework.registry import GLOBAL_TEST_REGISTRY  # noqa: E402
from e2e.framework.suite_files import load_suite  # noqa: E402


def native_growth(test_name: str, timeout: float) -> float | str:
    """MiB the golden run of `test_name` adds at its peak, or how its child ended."""

    def measure() -> float:
        before = isolation.rss_bytes(__import__("os").getpid())
        prepared = prepare(GLOBAL_TEST_REGISTRY[test_name])
        if prepared.golden_error:
            raise RuntimeError(prepared.golden_error)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return (peak - before) / MIB

    outcome = isolation.run_forked(measure, timeout)
    return outcome if isinstance(outcome, float) else type(outcome).__name__


def heavy_tests(reports: Path, over_mib: float) -> dict[str, float]:
    """Tests whose host grew past `over_mib` during a pair of that run: name -> MiB."""
    heavy: dict[str, float] = {}
    for row in json.loads((reports / "results.json").read_text()):
        mib = row.get("peak_rss_mib") or 0.0
        if mib > over_mib:
            heavy[row["test"]] = max(heavy.get(row["test"], 0.0), mib)
    return heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", type=Path)
    parser.add_argument("tests", nargs="*")
    parser.add_argument("--reports-dir", type=Path)
    parser.add_argument("--over-mib", type=float, default=2048.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    load_suite([args.suite], isolate=False)
    observed = heavy_tests(args.reports_dir, args.over_mib) if args.reports_dir else {}
    names = list(args.tests) + [name for name in observed if name not in args.tests]
    if not names:
        print(f"no test named, none over {args.over_mib:.0f} MiB")
        return
    print(f"{'test':<48} {'native peak growth':>20} {'largest pair (host RSS)':>24}")
    for name in names:
        growth = native_growth(name, args.timeout)
        native = f"{growth:.0f} MiB" if isinstance(growth, float) else growth
        pair = f"{observed[name]:.0f} MiB" if name in observed else "-"
        print(f"{name:<48} {native:>20} {pair:>24}")


if __name__ == "__main__":
    main()
