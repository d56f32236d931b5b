"""Follow one pair from its pytest item through the calls that pass it on, and count the
returns to a module already left (issue 43's measure of a pair's life being split).

    python benchmarks/pair_path.py [e2e/test_suite/matmul.py::MmModule_basic::linalg] [--show]

A call *passes the pair on* when one of its arguments is the pair's item, its `Pair`, its
`Test`, its `PreparedTest`, its `Result` or its config (the object, or the config's name
next to the test). Such calls are recorded, in the pytest process and in the test host it
forks (the spare host is turned off, so the host starts inside the pair's life), in project
code only (`e2e/`, `compiler/`), in time order. A *stop* is a run of one process's
consecutive recorded calls in one module (the other process's calls in between do not
split it: the pytest process that waits in `TestHost` while the host serves has not left
`host.py`); a *return* is a stop in a module an earlier stop of the same process was in.

`--no-queries` leaves out the methods of the pair's values called on themselves
(`Result.passed`, `Test.arg_shapes`, `Result.to_json`: the modules `result.py` and
`registry.py`): they read the pair, they do not pass it on.

The pair runs with no cache (`--no-result-cache -p no:cacheprovider`), so every step of its
life is taken. The count is of the path as the code takes it today, not of a reading.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VALUE_MODULES = {"e2e/framework/result.py", "e2e/framework/registry.py"}

# Runs inside the pytest process (as `-p`), before the item runs.
PLUGIN = r"""
import json, os, sys, time
from pathlib import Path

ROOT = os.environ["PAIR_PATH_ROOT"]
OUT = os.environ["PAIR_PATH_OUT"]
PROJECT = (os.path.join(ROOT, "e2e") + os.sep, os.path.join(ROOT, "compiler") + os.sep)


def _pair_types():
    from e2e.collect import E2EItem
    from e2e.configs.eager import EagerConfig
    from e2e.configs.pipeline import PipelineConfig
    from e2e.framework.registry import Test
    from e2e.framework.result import Result
    from e2e.framework.prepared import PreparedTest
    from e2e.pair import Pair

    return (E2EItem, Pair, Test, PreparedTest, Result, PipelineConfig, EagerConfig)


def _module(filename):
    return os.path.relpath(filename, ROOT)


import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    kinds = _pair_types()
    config_name = item.config_name
    files = {}

    def record(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(PROJECT):
            return
        count = code.co_argcount + code.co_kwonlyargcount
        values = [frame.f_locals.get(name) for name in code.co_varnames[:count]]
        if not any(isinstance(v, kinds) or (isinstance(v, str) and v == config_name) for v in values):
            return
        pid = os.getpid()
        if pid not in files:
            files[pid] = open(f"{OUT}.{pid}", "a", buffering=1)
        files[pid].write(json.dumps([time.monotonic_ns(), pid, _module(code.co_filename), code.co_qualname]) + "\n")

    sys.setprofile(record)
    try:
        return (yield)
    finally:
        sys.setprofile(None)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pair", nargs="?", default="e2e/test_suite/matmul.py::MmModule_basic::linalg")
    parser.add_argument("--show", action="store_true", help="print every stop")
    parser.add_argument("--no-queries", action="store_true", help="leave out the values' own methods")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pair-path-") as temporary:
        scratch = Path(temporary)
        (scratch / "pair_path_plugin.py").write_text(PLUGIN)
        out = scratch / "calls"
        env = {
            **os.environ,
            "PAIR_PATH_ROOT": str(ROOT),
            "PAIR_PATH_OUT": str(out),
            "E2E_SPARE_HOST": "0",
            "PYTHONPATH": os.pathsep.join([str(scratch), os.environ.get("PYTHONPATH", "")]),
        }
        command = [sys.executable, "-m", "pytest", args.pair, "-q", "-p", "pair_path_plugin"]
        command += ["--no-result-cache", "-p", "no:cacheprovider", "--reports-dir", str(scratch / "reports")]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
        calls = sorted(json.loads(line) for path in scratch.glob("calls.*") for line in path.read_text().splitlines())
    parent = calls[0][1] if calls else None
    stops: list[tuple[str, str, list[str]]] = []  # (process, module, functions), by first call
    current: dict[str, tuple[str, str, list[str]]] = {}  # each process's own last stop
    if args.no_queries:
        calls = [call for call in calls if call[2] not in VALUE_MODULES]
    for _, pid, module, function in calls:
        process = "pytest" if pid == parent else "host"
        if process in current and current[process][1] == module:
            current[process][2].append(function)
        else:
            current[process] = (process, module, [function])
            stops.append(current[process])
    seen: set[tuple[str, str]] = set()
    returns = 0
    for number, (process, module, functions) in enumerate(stops, 1):
        again = (process, module) in seen
        returns += again
        seen.add((process, module))
        if args.show:
            shown = ", ".join(dict.fromkeys(functions))
            print(f"{number:3} {'R' if again else ' '} {process:<6} {module}: {shown[:110]}")
    modules = {module for _, module, _ in stops}
    print(
        f"{args.pair}: {len(calls)} calls that pass the pair on, {len(stops)} stops in {len(modules)} modules, "
        f"{returns} returns to a module already left"
    )


if __name__ == "__main__":
    main()
