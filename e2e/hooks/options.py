"""The e2e plugin's options (`--config`, `--shard`, `--baseline`, ...) and its ini keys."""

from __future__ import annotations

from compiler.replay_runtime.target import DEFAULT, TARGETS
from e2e.configs import CONFIG_NAMES, OPT_IN_CONFIG_NAMES, RUNTIME_CONFIG_NAMES
from e2e.framework.result import SHAPE_MODES
from e2e.framework.suite_files import IMPORT_BUDGET
from e2e.opinfo import SLICES as OPINFO_SLICES
from e2e.settings import DEFAULT_MEMORY_CAP_GIB, NO_ISOLATION_TURNS_OFF


def pytest_addoption(parser):
    group = parser.getgroup("e2e", "PyTorch -> MLIR e2e suite")
    group.addoption(
        "--e2e-suite",
        "--suite-dir",
        dest="e2e_suite",
        action="append",
        default=[],
        help="a directory (or file) of e2e tests to run; repeatable (default: the e2e_suite ini)",
    )
    group.addoption(
        "--config",
        action="append",
        default=[],
        help=f"configs to run, comma separated or repeated: {', '.join(CONFIG_NAMES)}, "
        f"{', '.join(OPT_IN_CONFIG_NAMES)} (opt-in), a runtime config "
        f"({', '.join(RUNTIME_CONFIG_NAMES)}), an installed config's name, "
        f"or module:attribute (default: {', '.join(CONFIG_NAMES)})",
    )
    group.addoption(
        "--shapes",
        choices=SHAPE_MODES,
        default="annotated",
        help="annotated: `-1` dims of annotate_args are dynamic (default); "
        "static: the example inputs' shapes, as upstream torch-mlir exports them",
    )
    group.addoption(
        "--reports-dir", default=None, help="results, saved IR and reproducers (default: <rootdir>/reports)"
    )
    group.addoption("--xfail-dir", default=None, help="directory of the <config>[.static].txt xfail sets")
    group.addoption(
        "--opinfo-slice",
        choices=sorted(OPINFO_SLICES),
        default=None,
        help="run the OpInfo sweep: ci (sample 0 of one op in 8) or full; its suite and its xfail sets "
        "(e2e/opinfo/xfail/<slice>; an explicit --xfail-dir wins)",
    )
    group.addoption(
        "--generate",
        type=int,
        default=None,
        metavar="N",
        help="run N generated programs (e2e/generate), seeds --generate-seed S..S+N-1, as the suite",
    )
    group.addoption(
        "--generate-seed", type=int, default=0, metavar="S", help="the first seed of --generate (default 0)"
    )
    group.addoption(
        "--generate-boundary-share",
        type=float,
        default=None,
        metavar="F",
        help="the share of generated programs whose inputs are drawn at the boundaries (ties, zeros, halves, "
        "domain edges); default 0.5 (e2e/generate/boundary.py); 0: none",
    )
    group.addoption(
        "--import-timeout",
        type=float,
        default=IMPORT_BUDGET,
        help=f"seconds a suite file's import probe may take (default {IMPORT_BUDGET:g}; "
        "a file that computes its tests at import, as the OpInfo sweep does, takes minutes)",
    )
    group.addoption(
        "--memory-cap",
        type=float,
        default=DEFAULT_MEMORY_CAP_GIB,
        help=f"GiB a pair's child may add to the resident set it began with before it is killed "
        f"(default {DEFAULT_MEMORY_CAP_GIB}; 0: none)",
    )
    group.addoption(
        "--no-result-cache",
        action="store_true",
        help="rerun every pair (by default an unchanged test on an unchanged compiler reuses its result)",
    )
    group.addoption(
        "--no-frontend-cache",
        action="store_true",
        help="capture and import every test again (by default a capture whose test, torch and capture code "
        "are unchanged is taken from an earlier run, and its import too while torch-mlir and the importer are)",
    )
    group.addoption(
        "--no-program-cache",
        action="store_true",
        help="compile every program and run every pipeline stage again (by default the eager config's ops "
        "lowered by an earlier test host or run, on unchanged torch, torch-mlir and compiler, are only "
        "JIT-compiled, and a stage given an input an earlier one had takes its output)",
    )
    group.addoption(
        "--no-isolation",
        action="store_true",
        help=f"build, compile and run in the pytest process, for pdb; this turns off {NO_ISOLATION_TURNS_OFF}",
    )
    group.addoption(
        "--jit-target",
        choices=sorted(TARGETS),
        default=None,
        help=f"the CPU compiled programs are built for (RefBackend, IREE, XLA; default {DEFAULT}, or "
        f"E2E_JIT_TARGET): a fixed target makes undefined behaviour read the same on every machine",
    )
    group.addoption(
        "--shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based): a test's configs stay together; tests are dealt longest first "
        "to the least-loaded shard, by the durations of an earlier run (see --shard-durations)",
    )
    group.addoption(
        "--shard-durations",
        default=None,
        metavar="PATH",
        help="the results (reports dir, results.json or results.jsonl) whose durations --shard balances by "
        "(default: the durations pytest's cache keeps for ordering); give every shard the same",
    )
    group.addoption(
        "--baseline",
        default=None,
        metavar="PATH",
        help="an earlier run's results (reports dir, results.json or .jsonl): the e2e summary says what changed "
        "(as python -m e2e.tools.diff does), for the pairs this run ran",
    )
    group.addoption(
        "--e2e-service",
        default=None,
        metavar="URL",
        help="when the run ends, upload it with its bundles to the reproducer service at URL (python -m e2e.service "
        "serve); the token from $E2E_SERVICE_TOKEN or --e2e-service-token-file",
    )
    group.addoption("--e2e-service-label", default=None, help="the run's name on the service's pages")
    group.addoption("--e2e-service-token-file", default=None, metavar="PATH", help="a file holding the service's token")
    group.addoption("--no-reduce", action="store_true", help="do not write reproducer bundles for failures")
    group.addoption(
        "--reduce-unnamed",
        action="store_true",
        help="write bundles only for wrong results and crashes whose signature names no op: the bundle's "
        "guilty op is what tells such failures apart (a fuzzing campaign's blocks, whose triage then checks each "
        "bug's types once: the reducer does not)",
    )
    group.addoption("--reduce-timeout", type=float, default=60.0, help="reducer time box per failure, s (default 60)")
    group.addoption("--reduce-xfailed", action="store_true", help="write bundles for expected failures too")
    parser.addini("e2e_suite", type="paths", default=[], help="directories of e2e tests run by default")
    parser.addini("e2e_xfail_dir", type="paths", default=[], help="directory of the xfail sets")
