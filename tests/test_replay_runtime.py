"""The replay runtime: imports nothing of the project, and a bundle replays with it alone."""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest
from torch_mlir import ir

from compiler.executors.refbackend import BOUNDARY_AS_BITS
from compiler.refbackend import LOWER_PIPELINE
from compiler.replay_runtime.mlir import module_text, new_context, parse_module
from compiler.replay_runtime.replay import MISMATCH, Case, compile_signature
from compiler.replay_runtime.signature import Signature
from e2e.reducer.bundle import BundleInfo, write_bundle
from e2e.reducer.standalone import RUNTIME_DIR, NotStandalone, pass_modules
from tests.test_reducer import run_elsewhere

# What the runtime may import: torch, torch-mlir, numpy and the standard library (onnx
# only in the ONNX frontend's step, which needs it anyway).
ALLOWED = {"torch", "torch_mlir", "numpy", "onnx", *sys.stdlib_module_names}


def imports(source: str) -> set[str]:
    """Absolute imports by name; a relative import (inside the runtime) as its dots."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found.add(node.module if node.level == 0 else "." * node.level)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_runtime_imports_nothing_of_the_project():
    by_file = {path.name: imports(path.read_text()) for path in sorted(RUNTIME_DIR.glob("*.py"))}
    assert {"engine.py", "replay.py", "softfloat.py", "compare.py", "signature.py"} <= set(by_file)
    assert "torch_mlir.execution_engine" in by_file["engine.py"] and "." in by_file["replay.py"]  # the parse sees them
    outside = {
        name: sorted(n for n in found if not n.startswith(".") and n.split(".")[0] not in ALLOWED)
        for name, found in by_file.items()
    }
    assert not any(outside.values()), f"a bundle's copy could not load these: {outside}"


# f16 through the runtime's marshalling, the bf16 boundary pass (named by its runtime
# entry), the lowering and softfloat, the compare table: doubled where tripled is expected.
DOUBLES = """
func.func @main(%arg0: tensor<3xf16>) -> tensor<3xf16> {
  %0 = arith.addf %arg0, %arg0 : tensor<3xf16>
  return %0 : tensor<3xf16>
}
"""


def test_a_mismatch_bundle_replays_with_torch_mlir_and_numpy_alone(tmp_path):
    x = np.array([1.0, 2.5, -3.0], dtype=np.float16)
    case = Case(
        MISMATCH,
        "compare",
        [BOUNDARY_AS_BITS, *LOWER_PIPELINE],
        Signature("compare", "values"),
        result_dtypes=["float16"],
    )
    info = BundleInfo("T", "c", case, DOUBLES, DOUBLES, 2, 2, inputs=[x], expected=[x * 3])
    write_bundle(info, tmp_path / "bundle", check=False)
    done = run_elsewhere(tmp_path / "bundle", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCED: compare | values" in done.stdout and "3 of 3 elements differ" in done.stdout


def test_an_error_bundle_carries_its_python_pass_module(tmp_path):
    text = DOUBLES.replace("arith.addf %arg0, %arg0", "math.exp %arg0")
    pipeline = ["python:tests.broken_compilers:reject_exp"]
    signature, _ = compile_signature(text, "backend", pipeline, pipeline[-1])
    assert signature is not None and "math.exp" in signature.format()
    info = BundleInfo("T", "c", Case("error", "backend", pipeline, signature), text, text, 2, 2)
    write_bundle(info, tmp_path / "bundle", check=False)
    done = run_elsewhere(tmp_path / "bundle", tmp_path)
    assert done.returncode == 1 and f"REPRODUCED: {signature}" in done.stdout, done.stdout + done.stderr


def test_a_pass_module_that_needs_the_project_is_refused():
    with pytest.raises(NotStandalone, match="tests.test_reducer imports this project"):
        pass_modules(["python:tests.test_reducer:abort_on_aten_exp"])
    assert pass_modules([BOUNDARY_AS_BITS, "canonicalize"]) == {}  # the runtime's own passes travel with it


def test_a_bundle_whose_replay_runs_away_is_given_up_within_its_reductions_time_box(tmp_path, monkeypatch):
    # A pass crash that sometimes loops instead (a campaign's cumprod bundle: 118 s under a 10 s box).
    import time

    from e2e.reducer import bundle
    from e2e.reducer.finish import write_outcome

    monkeypatch.setattr(bundle, "CHILD_MIN_SECONDS", 3.0)
    text = DOUBLES.replace("arith.addf %arg0, %arg0", "math.tanh %arg0")
    pipeline = ["python:tests.broken_compilers:hang_on_tanh"]
    case = Case("error", "backend", pipeline, Signature("backend", "hang_on_tanh", "some error"))
    info = BundleInfo("T", "c", case, text, text, 2, 2)
    outcome = write_outcome(
        info, tmp_path / "bundle", start=time.monotonic(), stopped="1-minimal", verify=True, time_box=1.0
    )
    assert not outcome.verified and "no answer in 3 s" in outcome.note, outcome.note  # not the fixed 120 s


# What a backend pipeline leaves between its passes: torch <-> builtin tensor casts.
MID_PIPELINE = """
func.func @f(%arg0: !torch.vtensor<[2],f32>) -> tensor<2xf32> {
  %0 = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2],f32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


def test_text_saved_mid_way_through_a_backend_pipeline_parses_in_a_new_context():
    """`torch_c` has no Python registration: a new context cannot parse it by itself, and
    `parse_module` loads it for the text that holds it."""
    with pytest.raises(ir.MLIRError, match="torch_c"):
        ir.Module.parse(MID_PIPELINE, new_context())
    assert "torch_c.to_builtin_tensor" in module_text(parse_module(MID_PIPELINE))
