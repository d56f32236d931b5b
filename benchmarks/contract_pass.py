"""The JIT frontends' torch-backend stage with torch-mlir's contract pass run whole, and run
one iteration at a time to its fixed point (`compiler.stages.run_pass`): the same outcome
on every generated program, and the time each way.

    python benchmarks/contract_pass.py [--seeds 300000:128] [--frontend torchscript|ltc]

Each program is captured and imported once, in a child forked for it (a program that
crashes torch-mlir ends its child, not the run), and its imported module goes through
the stage's passes twice: each pass by `run_pipeline` (the contract pass whole), then by
`run_pass`. The two must end alike: the same failing pass, the same diagnostics, and the
same module text (output, or the module the failure left). A difference is printed and
makes the exit status 1. Both runs are in the same child, the whole pass first: the second
runs warmer, so compare the seconds of programs the contract rejects, not of those it accepts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_mlir import ir  # noqa: E402 - after the checkout is on sys.path

from compiler import pipelines  # noqa: E402
from compiler.frontends import load_frontend  # noqa: E402
from compiler.frontends.jit_frontend import jit_capture, jit_import_captured  # noqa: E402
from compiler.stages import expand, format_diagnostics, new_context, parse_module, run_pass, run_pipeline  # noqa: E402
from e2e.framework.testutils import TestUtils  # noqa: E402
from e2e.generate.grow import GenerationError, generate  # noqa: E402


def _stage(text: str, run) -> tuple[tuple, float]:
    """(failing pass, its diagnostics, the module's text) and the seconds it took."""
    context = new_context()
    passes = expand(pipelines.JIT_TO_TORCH_BACKEND, context)
    module = parse_module(text, context)
    start = time.perf_counter()
    for entry in passes:
        try:
            run(module, entry)
        except ir.MLIRError as error:
            seconds = time.perf_counter() - start
            return (entry, format_diagnostics(error), module.operation.get_asm(enable_debug_info=True)), seconds
    seconds = time.perf_counter() - start
    return (None, [], module.operation.get_asm(enable_debug_info=True)), seconds


def _one(seed: int, frontend: str) -> dict:
    try:
        program = generate(seed)
    except GenerationError:
        return {"seed": seed, "skipped": "not generated"}
    try:
        captured = jit_capture(
            program.module_class()(),
            program.make_inputs(TestUtils(0)),
            load_frontend(frontend),
            program.annotations() or None,
        )
        imported = jit_import_captured(captured)
    except Exception as error:  # noqa: BLE001 - a program this frontend does not take
        return {"seed": seed, "skipped": f"capture or import: {type(error).__name__}"}
    whole, whole_s = _stage(imported.raw_ir, lambda module, entry: run_pipeline(module, [entry]))
    by_iterations, by_iterations_s = _stage(imported.raw_ir, run_pass)
    return {
        "seed": seed,
        "same": whole == by_iterations,
        "fails": whole[0] is not None,
        "first_diagnostic": whole[1][0] if whole[1] else "",
        "whole_s": whole_s,
        "by_iterations_s": by_iterations_s,
    }


def _in_child(seed: int, frontend: str) -> dict:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        with os.fdopen(write, "w") as out:
            out.write(json.dumps(_one(seed, frontend)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as reply:
        text = reply.read()
    _, status = os.waitpid(pid, 0)
    return json.loads(text) if text else {"seed": seed, "ended": f"status {status}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="300000:128", help="S:N, the seeds S..S+N-1")
    parser.add_argument("--frontend", default="torchscript", choices=["torchscript", "ltc"])
    args = parser.parse_args()
    first, _, count = args.seeds.partition(":")
    rows = [_in_child(seed, args.frontend) for seed in range(int(first), int(first) + int(count or 1))]
    ran = [row for row in rows if "same" in row]
    differ = [row for row in ran if not row["same"]]
    for row in differ:
        print(f"DIFFERS: seed {row['seed']}: {row['first_diagnostic'][:160]}")
    ended = [row["seed"] for row in rows if "ended" in row]
    skipped = sum("skipped" in row for row in rows)
    for label, chosen in (
        ("rejected", [r for r in ran if r["fails"]]),
        ("accepted", [r for r in ran if not r["fails"]]),
    ):
        whole = sum(r["whole_s"] for r in chosen)
        by_iterations = sum(r["by_iterations_s"] for r in chosen)
        print(f"{label}: {len(chosen)} programs, whole pass {whole:.1f} s, by iterations {by_iterations:.1f} s")
    print(
        f"{args.frontend}: {len(ran)} programs through the stage, {len(ran) - len(differ)} the same, "
        f"{len(differ)} different; {skipped} not captured or imported; children that died: {ended or 'none'}"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
