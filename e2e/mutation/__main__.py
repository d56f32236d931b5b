"""`python -m e2e.mutation`: the suite's bug-finding power, measured with injected miscompiles.

    python -m e2e.mutation --config linalg -n 2                  # the whole suite, every mutation
    python -m e2e.mutation --config tosa -k 'Pool|Sort' --only 'cmpf_'
    python -m e2e.mutation --list                                # the catalogue
    python -m e2e.mutation --mutations my_pkg.my_mutations       # add your own (see catalogue.py)

Writes `reports/mutation/<config>.json` and `.html` and prints the kill matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

from e2e.configs import load_xfails
from e2e.framework.registry import GLOBAL_TEST_REGISTRY
from e2e.framework.suite_files import load_suite
from e2e.mutation import catalogue
from e2e.mutation.kill_matrix import before_after, kill_matrix, status, terminal_table, write_html, write_json
from e2e.mutation.run import Job, run_jobs

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("linalg", "tosa", "stablehlo")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m e2e.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="linalg", choices=BACKENDS, help="the FX config to mutate")
    parser.add_argument("--suite-dir", action="append", default=[], help="tests to run (default: e2e/test_suite)")
    parser.add_argument("--xfail-dir", default=str(ROOT / "e2e/configs/xfail"))
    parser.add_argument("-k", dest="select", default=None, help="a regex the test names must match")
    parser.add_argument("--exclude", default=None, help="a regex of test names to leave out")
    parser.add_argument("--only", default=None, help="a regex the mutation names must match")
    parser.add_argument(
        "--mutations", action="append", default=[], help="`module` or `module:attribute` of more mutations"
    )
    parser.add_argument("-n", dest="workers", type=int, default=1, help="parallel workers")
    parser.add_argument("--shapes", default="annotated", choices=("annotated", "static"))
    parser.add_argument("--reports-dir", default=str(ROOT / "reports"))
    parser.add_argument("--no-cache", action="store_true", help="rerun every (test, mutation)")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument(
        "--fail-on-survivors",
        action="store_true",
        help="exit 1 when a reached mutation survives every test and is not shown equivalent",
    )
    parser.add_argument("--before", default=None, help="an earlier kill matrix (JSON) to compare with")
    parser.add_argument("--out", default=None, help="the JSON path (default: <reports-dir>/mutation/<config>.json)")
    return parser.parse_args(argv)


def discover(suite_dirs: list[str]) -> list[str]:
    names: list[str] = []
    for file in load_suite(suite_dirs).values():
        if file.broken is not None:
            print(f"warning: {file.path} did not import: {file.broken.error.splitlines()[0]}", file=sys.stderr)
        names.extend(file.tests)
    return names


def main(argv=None) -> int:
    args = parse_args(argv)
    for spec in args.mutations:
        catalogue.load(spec)
    chosen = [m for m in catalogue.mutations() if not args.only or re.search(args.only, m.name)]
    if args.list:
        for m in chosen:
            print(f"{m.name:<34} {m.boundary:<13} {m.family:<12} {m.description}")
        return 0
    tests = discover(args.suite_dir or [str(ROOT / "e2e/test_suite")])
    tests = [
        t
        for t in tests
        if (not args.select or re.search(args.select, t)) and not (args.exclude and re.search(args.exclude, t))
    ]
    # Not validated against the registry: a selection of files (`--suite-dir FILE`) knows only some names.
    xfails = load_xfails(args.config, None, Path(args.xfail_dir), args.shapes)
    cache_dir = None if args.no_cache else str(ROOT / ".pytest_cache" / "e2e-mutation")
    names = tuple(m.name for m in chosen)
    # Models first: they take longest, and a long test last would leave a worker idle.
    tests.sort(key=lambda t: (not GLOBAL_TEST_REGISTRY[t].source.rsplit("/", 1)[-1].startswith("zoo"), t))
    jobs = [Job(t, args.config, args.shapes, t in xfails, cache_dir, names) for t in tests]
    start = time.monotonic()

    def progress(record, done, total):
        if done % 50 == 0 or done == total:
            print(f"[{time.monotonic() - start:6.0f} s] {done}/{total} tests", file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    records = run_jobs(jobs, args.workers, progress)
    wall = time.monotonic() - start
    # The machine may be shared: the load says how much of it this run had.
    load = [round(x, 1) for x in (*load_before[:1], *os.getloadavg())]
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)  # the processes reaped (most hosts and mutants)
    rows = kill_matrix(records, chosen)
    print(terminal_table(rows))
    passing = sum(r.baseline == "pass" for r in records)
    print(
        f"{len(records)} tests ({passing} pass unmutated), {len(chosen)} mutations, {wall:.0f} s wall, "
        f"{cpu:.0f} CPU s, "
        f"-n {args.workers}; load average {load[0]} at the start, {load[1:]} (1/5/15 min) at the end "
        f"on {os.cpu_count()} CPUs"
    )
    run = dict(
        config=args.config,
        shapes=args.shapes,
        tests=len(records),
        passing_unmutated=passing,
        mutations=len(chosen),
        wall_seconds=round(wall, 1),
        workers=args.workers,
        cpus=os.cpu_count(),
        load_average_start_and_end_1_5_15min=load,
        cpu_seconds=round(cpu),
        selection=args.select,
        command="python -m e2e.mutation " + " ".join(argv or sys.argv[1:]),
    )
    json_path = Path(args.out) if args.out else Path(args.reports_dir) / "mutation" / f"{args.config}.json"
    if args.before:
        print(before_after(json.loads(Path(args.before).read_text())["matrix"], rows))
    write_json(rows, run, records, json_path)
    write_html(rows, run, json_path.with_suffix(".html"))
    print(f"kill matrix: {json_path}, {json_path.with_suffix('.html')}")
    surviving = [row["name"] for row in rows if status(row) in ("SURVIVES", "BROKEN MUTATION")]
    if args.fail_on_survivors and surviving:
        print(f"surviving mutations: {', '.join(surviving)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
