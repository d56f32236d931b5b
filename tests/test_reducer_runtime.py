"""The reducer on a runtime config's execute crash: replayed by that runtime, not the RefBackend."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

from e2e.configs import load_config
from e2e.framework.signature import Signature
from tests.extras import requires_extra

# The interpreter's dot_general aborts the process on a zero-size contracting dimension
# (the spec says: zeros); the RefBackend twin runs this program without crashing.
EMPTY_CONTRACTION = """module {
  func.func @main(%arg0: tensor<0x3xf32>, %arg1: tensor<3x0xf32>) -> tensor<3x3xf32> {
    %0 = stablehlo.abs %arg1 : tensor<3x0xf32>
    %1 = stablehlo.negate %arg0 : tensor<0x3xf32>
    %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<3x0xf32>, tensor<0x3xf32>) -> tensor<3x3xf32>
    %3 = stablehlo.add %2, %2 : tensor<3x3xf32>
    return %3 : tensor<3x3xf32>
  }
}
"""
ABORT = "crash | execute | LLVM ERROR: Incompatible index and shape found while flattening index"

needs_interpreter = requires_extra("runtimes", "jax", "jaxlib")  # StableHLO's reference interpreter


@needs_interpreter
def test_an_interpreter_abort_in_execute_is_reduced_and_replayed_on_the_interpreter(tmp_path):
    from compiler.executors import replay
    from e2e.reducer.strategies import reduce_result

    ir_dir = tmp_path / "ir" / "T" / "stablehlo@interp"
    ir_dir.mkdir(parents=True)
    (ir_dir / "4-lower.mlir").write_text(EMPTY_CONTRACTION)
    result = SimpleNamespace(test="T", outcome="crash", stage="execute", signature=Signature.parse(ABORT))

    outcome = reduce_result(result, None, load_config("stablehlo@interp"), tmp_path, time_box=60)

    assert outcome.bundle is not None and outcome.verified, outcome.note
    case = json.loads((outcome.bundle / "case.json").read_text())
    assert case["pipeline"] == [replay.entry("interp", "stablehlo", run=True)]  # not the RefBackend's JIT
    assert case["signature"].startswith(ABORT)  # the pair's own signature (and its frames), shown by the interpreter
    assert outcome.guilty_op == "stablehlo.dot_general"
    assert outcome.ops_before == 5 and outcome.ops_after == 2  # dot_general and return
    done = subprocess.run(
        [sys.executable, "-I", "repro.py"], cwd=outcome.bundle, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the interpreter's abort, replayed in a child
    assert f"REPRODUCED: {ABORT}" in done.stdout
    # ... and with the interpreter's own tools: jax on the reduced program, nothing of this project.
    native = outcome.bundle / "native"
    assert "stablehlo.dot_general" in (native / "program.mlir").read_text()
    assert "stablehlo.abs" not in (native / "program.mlir").read_text()
    assert not re.search(r"^\s*(from|import) (e2e|compiler|tests)\b", (native / "run_interp.py").read_text(), re.M)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(["sh", "run.sh"], cwd=native, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 128 + signal.SIGABRT and "Incompatible index and shape" in ran.stderr
    assert "Reproduce with the StableHLO interpreter's own tools" in (outcome.bundle / "README.md").read_text()


@needs_interpreter
def test_a_candidate_the_interpreter_aborts_on_answers_an_error_cases_query():
    """An execute error of a runtime is reduced by replaying its `_run` entry too: a candidate on
    which the interpreter aborts must answer with its crash, not take the reducer down."""
    from compiler.executors import replay
    from e2e.reducer.case import ERROR, Case, observe

    case = Case(ERROR, "execute", [replay.entry("interp", "stablehlo", run=True)], Signature("execute", "some error"))
    assert observe(case, EMPTY_CONTRACTION).format().startswith(ABORT)  # then the crash's native frames
