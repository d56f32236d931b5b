"""`python -m e2e.opinfo --report [--json PATH]`: what the sweep takes and skips, by reason."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from e2e.opinfo.collect import collect, in_ci_slice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.opinfo", description=__doc__)
    parser.add_argument("--report", action="store_true", help="print the collection summary")
    parser.add_argument("--json", type=Path, help="also write every test and skip as JSON")
    args = parser.parse_args(argv)
    if not (args.report or args.json):
        parser.error("nothing to do: give --report and/or --json PATH")
    collection = collect()
    if args.report:
        print(collection.summary())
        print(f"opinfo_ci slice: {sum(in_ci_slice(c) for c in collection.cases)} tests")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "tests": [{"name": c.name, "op": c.op, "dtype": c.dtype, "sample": c.index} for c in collection.cases],
            "skips": [asdict(s) for s in collection.skips],
        }, indent=1) + "\n")
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
