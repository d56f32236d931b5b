"""The reducer's command line.

python -m e2e.reducer mlir FILE --pipeline "builtin.module(...)" [--stage S] (--error REGEX | --crash)
python -m e2e.reducer replay BUNDLE_DIR
python -m e2e.reducer test TEST_NAME --config CONFIG [--e2e-suite PATH]

`test` loads the suite the test is in (default: this checkout's e2e/test_suite; any
directory or file of e2e tests: a suite of your own, e2e/opinfo/suite, upstream's
test_suite), runs the test on the config and reduces its failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from e2e.reducer.pair import DEFAULT_TIME_BOX

OWN_SUITE = Path(__file__).resolve().parents[1] / "test_suite"


def _pipeline(text: str) -> list[str]:
    from compiler.stages import split_top_level

    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    return split_top_level(text)


def _report(outcome) -> int:
    print(outcome.summary())
    if outcome.note:
        print(outcome.note)
    if outcome.bundle is not None:
        print(f"bundle: {outcome.bundle}/README.md")
    return 0 if outcome.bundle is not None and outcome.verified else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.reducer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    mlir = sub.add_parser("mlir", help="reduce a .mlir file that fails or crashes in a pipeline")
    mlir.add_argument("file", type=Path)
    mlir.add_argument(
        "--pipeline", required=True, help='"builtin.module(a,b)" or "a,b"; python:<module>:<fn> entries allowed'
    )
    mlir.add_argument("--stage", default="lower")
    kind = mlir.add_mutually_exclusive_group(required=True)
    kind.add_argument("--error", metavar="REGEX", help="the diagnostics must match this")
    kind.add_argument("--crash", action="store_true", help="the pipeline crashes the process")
    mlir.add_argument("--name", default=None, help="bundle name (default: the file's stem)")
    replay = sub.add_parser("replay", help="replay a bundle; exit 1 while the bug is there")
    replay.add_argument("bundle", type=Path)
    test = sub.add_parser("test", help="run one test on one config and reduce its failure")
    test.add_argument("name")
    test.add_argument("--config", required=True, help="a config name or module:attribute")
    test.add_argument(
        "--e2e-suite",
        "--suite-dir",
        dest="e2e_suite",
        action="append",
        type=Path,
        default=[],
        help=f"a directory (or file) of e2e tests; repeatable (default: {OWN_SUITE})",
    )
    for p in (mlir, test):
        p.add_argument("--reports-dir", type=Path, default=Path("reports"))
        p.add_argument("--timeout", type=float, default=DEFAULT_TIME_BOX, help="time box, seconds")
    args = parser.parse_args(argv)

    if args.command == "replay":
        from compiler.replay_runtime.replay import main as replay_main

        return replay_main(args.bundle.resolve())
    if args.command == "mlir":
        from e2e.reducer.failure import reduce_mlir

        outcome = reduce_mlir(
            args.file.read_text(),
            _pipeline(args.pipeline),
            args.stage,
            crash=args.crash,
            error_pattern=args.error,
            test=args.name or args.file.stem,
            config="cli",
            reports_dir=args.reports_dir,
            time_box=args.timeout,
        )
        return _report(outcome)
    from e2e.configs import load_config
    from e2e.framework.isolation import Limits
    from e2e.framework.prepared import prepare
    from e2e.framework.registry import GLOBAL_TEST_REGISTRY
    from e2e.framework.runner import run_pair
    from e2e.framework.suite_files import load_suite
    from e2e.reducer.strategies import reduce_result

    suites = args.e2e_suite or [OWN_SUITE]
    files = load_suite(suites, isolate=False)  # a file that raises is reported, not fatal
    if not any(args.name in f.tests for f in files.values()):
        print(f"unknown test {args.name!r} in {', '.join(map(str, suites))}", file=sys.stderr)
        for f in files.values():
            if f.broken is not None or f.skip_reason:
                print(f"  {f.path}: {f.skip_reason or f.broken.signature}", file=sys.stderr)
        return 2
    config = load_config(args.config)
    prepared = prepare(GLOBAL_TEST_REGISTRY[args.name])
    result = run_pair(prepared, config, reports_dir=args.reports_dir, limits=Limits(300, None))
    if result.passed:
        print(f"{args.name} passes on {args.config}: nothing to reduce")
        return 0
    print(f"{args.name} on {args.config}: {result.outcome}: {result.signature}")
    return _report(reduce_result(result, prepared, config, args.reports_dir, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
