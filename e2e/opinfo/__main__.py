"""The OpInfo sweep's command line.

    python -m e2e.opinfo --report [--json PATH]          # what the sweep takes and skips, by reason
    python -m e2e.opinfo --update-xfails [results.json] --slice ci|full  # rewrite the xfail sets from a run

The CI slice and the full sweep (`python -m pytest --opinfo-slice ci|full`) keep separate
xfail sets (`e2e/opinfo/xfail/ci`, `e2e/opinfo/xfail/full`: `SLICES`): xfail names must be
registered tests, and the CI slice's suite file registers only the slice's tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from e2e.opinfo import SLICES
from e2e.opinfo.collect import collect, in_ci_slice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.opinfo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--report", action="store_true", help="print the collection summary")
    parser.add_argument("--json", type=Path, help="also write every test and skip as JSON")
    parser.add_argument(
        "--update-xfails",
        type=Path,
        nargs="?",
        const=Path("reports/results.json"),
        metavar="RESULTS",
        help="rewrite the sweep's xfail sets from a run's results.json",
    )
    parser.add_argument(
        "--slice",
        choices=sorted(SLICES),
        default="full",
        help="which xfail sets --update-xfails rewrites (default: full)",
    )
    args = parser.parse_args(argv)
    if args.update_xfails:
        from e2e.configs.update_xfails import update

        if not args.update_xfails.exists():
            parser.error(f"{args.update_xfails} not found: run the sweep first")
        directory = SLICES[args.slice].xfail_dir
        for path, (added, removed) in update(args.update_xfails, directory).items():
            print(f"{path}: +{added} -{removed}")
        return 0
    if not (args.report or args.json):
        parser.error("nothing to do: give --report, --json PATH or --update-xfails")
    collection = collect()
    if args.report:
        print(collection.summary())
        print(f"opinfo_ci slice: {sum(in_ci_slice(c) for c in collection.cases)} tests")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "tests": [
                        {"name": c.name, "op": c.op, "dtype": c.dtype, "sample": c.index} for c in collection.cases
                    ],
                    "skips": [asdict(s) for s in collection.skips],
                },
                indent=1,
            )
            + "\n"
        )
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
