"""Which verdicts change with the platform: two runs of the same suite, compared pair by pair.

    ATEN_CPU_CAPABILITY=avx2 python -m pytest e2e -n 2 --reports-dir R1
    ATEN_CPU_CAPABILITY=default python -m pytest e2e -n 2 --reports-dir R2
    python benchmarks/platform_verdicts.py R1 R2

Prints each run's platform (from run.json), how many pairs both ran, and every pair whose
outcome, failing stage or signature kind differs, with both signatures: a candidate for a
platform-marked xfail entry (`@avx512`) or a comparison that should be more robust.
Timeouts and memory kills are listed apart: they depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from e2e.framework.results_files import row_signature

_LOAD_DEPENDENT = ("timeout", "memory")


def _rows(reports: Path) -> tuple[dict, dict[tuple[str, str], dict]]:
    run = json.loads((reports / "run.json").read_text())
    rows = json.loads((reports / "results.json").read_text())
    return run, {(row["test"], row["config"]): row for row in rows}


def _verdict(row: dict) -> tuple[str, str]:
    signature = row_signature(row)
    return row["outcome"], signature.key() if signature is not None else ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    (run1, rows1), (run2, rows2) = _rows(args.first), _rows(args.second)
    print(f"{args.first}: platform {run1.get('platform', '?')} on {run1.get('cpu', '?')}")
    print(f"{args.second}: platform {run2.get('platform', '?')} on {run2.get('cpu', '?')}")
    both = sorted(set(rows1) & set(rows2))
    differ = [pair for pair in both if _verdict(rows1[pair]) != _verdict(rows2[pair])]
    load = [p for p in differ if {rows1[p]["outcome"], rows2[p]["outcome"]} & set(_LOAD_DEPENDENT)]
    print(
        f"pairs in both runs: {len(both)}; verdicts that differ: {len(differ) - len(load)}"
        f" (and {len(load)} timeouts or memory kills, which follow the machine's load)"
    )
    for test, config in differ:
        if (test, config) in load:
            continue
        a, b = rows1[(test, config)], rows2[(test, config)]
        print(
            f"  {test} on {config}:\n    {a['outcome']}: {a.get('signature') or '-'}\n    {b['outcome']}: {b.get('signature') or '-'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
