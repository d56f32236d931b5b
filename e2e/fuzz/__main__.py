"""A fuzzing campaign: generated programs through the suite, reported as distinct bugs.

    python -m e2e.fuzz --minutes M --seed S --config linalg,tosa -n 2 --reports-dir R [--shard I/N]
    python -m e2e.fuzz --programs 3 --config linalg --reports-dir R
    python -m e2e.fuzz --report-only --reports-dir R      # classify and report an existing campaign

Writes R/results.json, run.json, index.html and repro/ (the run format `e2e.tools.merge` and
`e2e.tools.diff` read; shards of one campaign merge like any run's), R/campaign.json (blocks,
seeds, costs) and the campaign report R/fuzz.md and R/fuzz.html (see docs/fuzz.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from e2e.framework.shards import ShardSpec
from e2e.fuzz import BUILT_IN_PAIR_BUDGET, PAIR_BUDGET, pair_budget
from e2e.fuzz.campaign import BLOCK_PAIRS, Campaign, Plan, default_block
from e2e.fuzz.triage import analyse
from e2e.generate.boundary import SHARE_ENV


def parser() -> argparse.ArgumentParser:
    """The campaign's command line."""
    parser = argparse.ArgumentParser(prog="python -m e2e.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=None, help="time budget (default: none; give --programs)")
    parser.add_argument("--programs", type=int, default=None, help="stop after this many programs")
    parser.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument(
        "--block",
        type=int,
        default=None,
        help=f"programs per pytest run (default: {BLOCK_PAIRS} pairs' worth, 1,024 on six configs, 472 on thirteen)",
    )
    parser.add_argument("--config", default="linalg", help="comma-separated configs (default linalg)")
    parser.add_argument(
        "--boundary-share",
        type=float,
        default=None,
        help="the share of programs drawn at the boundaries (default: the generator's, 0.5; 0: none)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds a pair may take before it counts as a hang (default {BUILT_IN_PAIR_BUDGET:g} on the six "
        f"built-in configs alone, else {PAIR_BUDGET:g})",
    )
    parser.add_argument("-n", dest="workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("--reports-dir", type=Path, required=True)
    parser.add_argument("--shard", type=ShardSpec.parse, default=ShardSpec(1, 1), help="I/N: this shard's blocks")
    parser.add_argument(
        "--scheduler",
        default=None,
        help="run the blocks on a Dask cluster: a scheduler's address (tcp://HOST:8786), or local:N for a local "
        "cluster of N worker processes (see docs/fuzz.md)",
    )
    parser.add_argument("--report-only", action="store_true", help="classify and report the campaign in the directory")
    parser.add_argument(
        "--reduce-minutes",
        type=float,
        default=0.0,
        help="minutes to shrink the new bugs' programs into regression tests written into the suite "
        "(e2e/test_suite/generated_regressions.py and the xfail sets); default 0: none written",
    )
    parser.add_argument(
        "--reduce-bugs",
        type=int,
        default=None,
        help="reduce at most this many new bugs (one per signature and guilty op first, round-robin "
        "over the configs); default: all",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    command = parser()
    args, extra = command.parse_known_args(argv)
    if not args.report_only and args.minutes is None and args.programs is None:
        command.error("give --minutes or --programs (or both)")
    configs = [c.strip() for c in args.config.split(",") if c.strip()]
    if args.boundary_share is not None:
        # The blocks' pytest runs and this process's triage (which grows what no block saved) inherit it.
        os.environ[SHARE_ENV] = f"{args.boundary_share:g}"
    if not args.report_only:
        client = None
        if args.scheduler:
            from e2e.fuzz.cluster import connect

            client = connect(args.scheduler)
        Campaign(
            configs,
            Plan(args.seed, default_block(configs) if args.block is None else args.block, args.shard),
            args.reports_dir,
            workers=args.workers,
            pair_budget=pair_budget(configs) if args.timeout is None else args.timeout,
            minutes=args.minutes,
            programs=args.programs,
            extra=extra,
            client=client,
        ).run(log=lambda line: print(line, flush=True))
    log = lambda line: print(line, flush=True)  # noqa: E731
    print(
        analyse(
            args.reports_dir, None if args.report_only else configs, args.reduce_minutes * 60, log, args.reduce_bugs
        )
    )
    print(f"fuzz: report in {args.reports_dir / 'fuzz.md'} and {args.reports_dir / 'fuzz.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
