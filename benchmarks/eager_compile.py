"""Where the `eager` config's op compiles spend their time, and how many are repeats.

    python benchmarks/eager_compile.py e2e/test_suite/matmul.py [more files] [-k MmModule]

Every test of the files runs on the `eager` config in this one process (no host, no
cache across tests), each op compile timed by stage: capture (the one-node FX graph),
import (the FX importer), torch-backend, backend, lower (linalg -> LLVM) and the JIT
(the ExecutionEngine). A compiled op is identified by its single op's raw torch IR:
the programs that are the same text in several tests are what a cache of lowered
programs across tests saves the pass pipelines of.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compiler.frontends.eager_ops as eager_ops  # noqa: E402 - after the checkout is on sys.path
import compiler.refbackend as refbackend
from compiler.stages import Snapshots
from e2e.configs.eager import CONFIG
from e2e.framework.prepared import prepare
from e2e.framework.registry import GLOBAL_TEST_REGISTRY
from e2e.framework.suite_files import load_suite

SECONDS: Counter[str] = Counter()
PROGRAMS: Counter[str] = Counter()  # raw torch IR of each compiled op -> compiles
TESTS_OF: dict[str, set[str]] = defaultdict(set)


def _timed(function, stage: str):
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[stage] += time.perf_counter() - start

    return timed


def _instrument(test_name: list[str]) -> None:
    """Time the capture, the importer and the JIT; the pass stages come from Snapshots."""
    eager_ops.single_op_graph = _timed(eager_ops.single_op_graph, "capture")
    eager_ops.decomposed_op_graph = _timed(eager_ops.decomposed_op_graph, "capture")
    importer = eager_ops.FxImporter.import_stateless_graph
    eager_ops.FxImporter.import_stateless_graph = _timed(importer, "import")
    refbackend.RefBackendProgram = type(
        "TimedProgram",
        (refbackend.RefBackendProgram,),
        {"__init__": _timed(refbackend.RefBackendProgram.__init__, "jit")},
    )
    compile_single_op = eager_ops.compile_single_op

    def counted(call, snapshots: Snapshots):
        start = time.perf_counter()
        try:
            return compile_single_op(call, snapshots)
        finally:
            SECONDS["total"] += time.perf_counter() - start
            for stage, spent in snapshots.stage_seconds().items():
                SECONDS[stage] += spent
            torch_ir = snapshots.texts.get("torch-backend")
            if torch_ir is not None:
                PROGRAMS[torch_ir] += 1
                TESTS_OF[torch_ir].add(test_name[0])

    import compiler.frontends.eager_mode as eager_mode

    eager_mode.compile_single_op = counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("-k", default="", help="only tests whose name contains this")
    args = parser.parse_args()
    suite = load_suite(args.paths)
    names = [name for suite_file in suite.values() for name in suite_file.tests if args.k in name]
    current = [""]
    _instrument(current)
    start = time.perf_counter()
    for name in names:
        current[0] = name
        prepared = prepare(GLOBAL_TEST_REGISTRY[name])
        program = CONFIG.compile(prepared, Snapshots())
        try:
            CONFIG.run(program, prepared.golden)
        except Exception:
            pass
        finally:
            program.close()
    wall = time.perf_counter() - start
    total = SECONDS["total"]
    # The lower stage's seconds include the JIT (it runs in the stage `lower`).
    parts = {
        "capture (one-node FX graph)": SECONDS["capture"],
        "import (FX importer)": SECONDS["import"],
        "torch-backend pipeline": SECONDS["torch-backend"],
        "backend pipeline (to linalg)": SECONDS["backend"],
        "lower pipeline (linalg -> LLVM)": SECONDS["lower"] - SECONDS["jit"],
        "JIT (ExecutionEngine)": SECONDS["jit"],
    }
    parts["other"] = total - sum(parts.values())
    compiles = sum(PROGRAMS.values())
    print(f"{len(names)} tests, {wall:.2f} s in all; {compiles} op compiles, {total:.2f} s ({total / wall:.0%})")
    for part, spent in parts.items():
        print(f"  {part:<34} {spent:7.3f} s  {spent / total:5.1%}  {1000 * spent / max(compiles, 1):6.2f} ms/compile")
    repeated = sum(count - 1 for count in PROGRAMS.values())
    shared = sum(1 for tests in TESTS_OF.values() if len(tests) > 1)
    print(
        f"{len(PROGRAMS)} distinct programs among {compiles} compiles: {repeated} repeats "
        f"({repeated / max(compiles, 1):.0%}); {shared} programs compiled by more than one test"
    )


if __name__ == "__main__":
    main()
