"""The reducer against deliberately broken compilers (tests/broken_compilers.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compiler.frontends import load_frontend
from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.pipelines import TORCH_BACKEND_TO_LINALG
from compiler.refbackend import LOWER_PIPELINE
from compiler.stages import CONTRACT_PASS
from e2e.configs import load_config
from e2e.framework.isolation import Limits
from e2e.framework.signature import Signature, crash_signature, guilty_op, normalize, stage_signature
from e2e.reducer.bundle import REPRO_INDEX_ENV, with_reproducer_resource
from e2e.reducer.case import CRASH, Case, observe
from e2e.reducer.failure import reduce_mismatch, reduce_mlir
from e2e.reducer.jit_graph import reduce_jit_mismatch
from e2e.reducer.localize import localize_crash, stage_pipelines
from e2e.reducer.reduce import give_input_sizes, op_count

BROKEN = "python:tests.broken_compilers:"


class Mixed(torch.nn.Module):
    def forward(self, x, y):
        a = torch.exp(x) + y
        b = torch.tanh(a) * y
        return torch.relu(b - x) + a


def torch_backend_ir() -> str:
    text, _ = fx_to_torch_backend_ir(Mixed(), [torch.rand(3, 4), torch.rand(3, 4)])
    return text


def run_repro(bundle: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=120)


# Runs repro.py with this project's packages unimportable (an editable install would
# otherwise find them even in isolated mode): torch, torch-mlir and numpy only.
PROJECT = ("compiler", "e2e", "tests", "torch_mlir_e2e_test")
WITHOUT_THE_PROJECT = """
import runpy, sys
class NoProject:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"repro.py imports {name}")
sys.meta_path.insert(0, NoProject())
sys.argv = ["repro.py"]
runpy.run_path("repro.py", run_name="__main__")
"""


def run_elsewhere(bundle: Path, tmp_path: Path, blocked: tuple[str, ...] = PROJECT) -> subprocess.CompletedProcess:
    """The bundle copied out of the checkout, run in isolated mode, no PYTHONPATH, the
    project (or whatever `blocked` names) unimportable."""
    copy = tmp_path / "attached-to-an-issue"
    shutil.copytree(bundle, copy)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-I", "-c", f"BLOCKED = {blocked!r}\n{WITHOUT_THE_PROJECT}"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pass_failing_on_one_op_kind(tmp_path):
    original = torch_backend_ir()
    pipeline = [*TORCH_BACKEND_TO_LINALG, BROKEN + "reject_exp"]
    outcome = reduce_mlir(
        original, pipeline, "backend", error_pattern="math.exp", test="T", config="c", reports_dir=tmp_path, time_box=30
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "math.exp"
    repro = (outcome.bundle / "repro.mlir").read_text()
    assert op_count(repro.split("{-#")[0]) <= 5 < op_count(original)
    assert "mlir_reproducer" in repro and "reject_exp" in repro
    assert "math.exp" in (outcome.bundle / "README.md").read_text()
    done = run_repro(outcome.bundle)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout


def test_bundle_runs_without_the_checkout(tmp_path):
    pipeline = [*TORCH_BACKEND_TO_LINALG, BROKEN + "reject_exp"]
    outcome = reduce_mlir(
        torch_backend_ir(), pipeline, "backend", test="T", config="c", reports_dir=tmp_path / "reports", time_box=30
    )
    script = (outcome.bundle / "repro.py").read_text()
    assert "sys.path" not in script and not re.search(r"^\s*(from|import) (e2e|compiler|tests)\b", script, re.M)
    assert (outcome.bundle / "replay_runtime" / "replay.py").exists()  # the runtime, copied whole
    assert (outcome.bundle / "tests.broken_compilers.py").exists()  # the pipeline's Python pass module
    done = run_elsewhere(outcome.bundle, tmp_path)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
    readme = (outcome.bundle / "README.md").read_text()
    assert "## Expected" in readme and "## Actual" in readme and "torch-mlir 2" in readme


def test_pass_crashing_the_process(tmp_path):
    pipeline = [*TORCH_BACKEND_TO_LINALG, BROKEN + "abort_on_tanh"]
    outcome = reduce_mlir(
        torch_backend_ir(), pipeline, "backend", crash=True, test="T", config="c", reports_dir=tmp_path, time_box=40
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert "math.tanh" in outcome.guilty_op
    assert op_count((outcome.bundle / "repro.mlir").read_text().split("{-#")[0]) <= 5
    assert run_repro(outcome.bundle).returncode != 0  # the repro crashes while the bug is there
    # Its first process only starts the child that replays the crash: it imports no MLIR
    # (`-X importtime` lists the first process's imports; the child is started without it).
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(outcome.bundle / "repro.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
    assert "replay_runtime.signature" in imported  # it read the case and its signature
    assert not [name for name in imported if name.split(".")[0] in ("torch", "torch_mlir", "numpy")]


# A JIT frontend's `@main`: every tensor argument declares its bound; `cat` has no operand
# of its result's type, so removing it needs a stand-in from elsewhere.
JIT_MAIN = """
module {
  func.func @main(%arg0: !torch.tensor {torch.type_bound = !torch.vtensor<[3,3],f32>},
                  %arg1: !torch.tensor {torch.type_bound = !torch.vtensor<[3,3],f32>}) -> (!torch.tensor, !torch.tensor) {
    %int0 = torch.constant.int 0
    %0 = torch.prim.ListConstruct %arg0, %arg1 : (!torch.tensor, !torch.tensor) -> !torch.list<tensor>
    %1 = torch.aten.cat %0, %int0 : !torch.list<tensor>, !torch.int -> !torch.tensor
    %2 = torch.aten.tanh %arg1 : !torch.tensor -> !torch.tensor
    %3 = torch.aten.mm %arg0, %2 : !torch.tensor, !torch.tensor -> !torch.tensor
    return %1, %3 : !torch.tensor, !torch.tensor
  }
}
"""


# The same after `torch-adjust-calling-conventions`: value-tensor arguments, copied to the
# non-value tensors the ops take; removing a copy has no operand of its result's type.
ADJUSTED_MAIN = """
module {
  func.func @main(%arg0: !torch.vtensor<[3,3],f32>, %arg1: !torch.vtensor<[3,3],f32>) -> !torch.tensor {
    %0 = torch.tensor_static_info_cast %arg0 : !torch.vtensor<[3,3],f32> to !torch.vtensor
    %1 = torch.copy.to_tensor %0 : !torch.tensor
    %2 = torch.tensor_static_info_cast %arg1 : !torch.vtensor<[3,3],f32> to !torch.vtensor
    %3 = torch.copy.to_tensor %2 : !torch.tensor
    %4 = torch.aten.tanh %3 : !torch.tensor -> !torch.tensor
    %5 = torch.aten.mm %1, %4 : !torch.tensor, !torch.tensor -> !torch.tensor
    return %5 : !torch.tensor
  }
}
"""


def _reduce_crash(text: str, broken: str, tmp_path, test: str = "T"):
    """A crash of `text` in the broken pass `broken` (torch-backend stage), reduced under `tmp_path`."""
    return reduce_mlir(
        text, [BROKEN + broken], "torch-backend", crash=True, test=test, config="c", reports_dir=tmp_path, time_box=40
    )


@pytest.mark.parametrize("text", [JIT_MAIN, ADJUSTED_MAIN], ids=["jit-main", "after-calling-conventions"])
def test_a_reduction_never_gives_a_function_an_argument_no_frontend_gives(tmp_path, text):
    # Removing `cat` (or a `copy.to_tensor`) used to make its result a new argument without
    # a bound, on which the pass crashes too: the reduction drifted there (0 ops left, no
    # guilty op), as torchscript segfaults of a campaign did, into one bundle with no op.
    outcome = _reduce_crash(text, "abort_on_aten_mm_or_an_unbound_argument", tmp_path)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "torch.aten.mm"
    repro = (outcome.bundle / "repro.mlir").read_text().split("{-#")[0]
    unbound = r"%arg\d+: !torch\.(tensor(?! \{torch\.type_bound)|vtensor[,)])"
    assert "%arg0" in repro and not re.search(unbound, repro), repro  # each argument as its pass is given it


def _jit_main(*bodies: str) -> str:
    """A JIT frontend's `@main` of two bound tensors returning each of `bodies` (`%arg0`, `%arg1`)."""
    ops = "".join(f"    %{i} = {body}\n" for i, body in enumerate(bodies))
    results = ", ".join(f"%{i}" for i in range(len(bodies)))
    types = ", ".join(["!torch.tensor"] * len(bodies))
    bound = "!torch.tensor {torch.type_bound = !torch.vtensor<[3,3],f32>}"
    return (
        f"module {{\n  func.func @main(%arg0: {bound}, %arg1: {bound}) -> ({types}) {{\n{ops}"
        f"    return {results} : {types}\n  }}\n}}\n"
    )


MM = "torch.aten.mm %arg0, %arg1 : !torch.tensor, !torch.tensor -> !torch.tensor"
TANH = "torch.aten.tanh %arg1 : !torch.tensor -> !torch.tensor"
RELU = "torch.aten.relu %arg0 : !torch.tensor -> !torch.tensor"


def test_crashes_of_one_signature_share_a_bundle_only_with_their_own_bug(tmp_path):
    def reduce(test: str, *bodies: str):
        return _reduce_crash(_jit_main(*bodies), "abort_on_aten_mm_or_tanh", tmp_path, test)

    on_mm = reduce("OnMm", RELU, MM)
    on_tanh = reduce("OnTanh", TANH, RELU)  # the same signature as OnMm's, another bug
    again_tanh = reduce("AgainTanh", RELU, TANH)
    both = reduce("Both", MM, TANH)
    assert on_mm.guilty_op == "torch.aten.mm" and on_mm.stopped != "shared"
    assert on_tanh.guilty_op == "torch.aten.tanh" and on_tanh.bundle != on_mm.bundle, on_tanh
    assert again_tanh.stopped == "shared" and again_tanh.bundle == on_tanh.bundle
    assert both.stopped == "shared" and both.bundle == on_mm.bundle  # the first bundle that fits
    tests = (on_tanh.bundle / "tests.txt").read_text()
    assert "OnTanh" in tests and "AgainTanh" in tests


def test_runs_that_share_a_claim_index_reduce_a_bug_once(tmp_path, monkeypatch):
    # A campaign's blocks are runs of their own (reports directories of their own); with one
    # index a later block's crash shares the bundle an earlier block wrote.
    monkeypatch.setenv(REPRO_INDEX_ENV, str(tmp_path / "index"))
    first = _reduce_crash(_jit_main(RELU, MM), "abort_on_aten_mm_or_tanh", tmp_path / "block0", "First")
    later = _reduce_crash(_jit_main(MM, TANH), "abort_on_aten_mm_or_tanh", tmp_path / "block1", "Later")
    assert first.stopped != "shared" and first.bundle.is_relative_to(tmp_path / "block0")
    assert later.stopped == "shared" and later.bundle == first.bundle
    assert "Later [c]" in (first.bundle / "tests.txt").read_text()


# A torchscript program's input to `torch-lower-to-backend-contract`, on which torch-mlir
# 20261001 segfaults (a campaign's seed 40): inside the contract pass, `norm` with a `p` the
# pass cannot fold leaves `hardswish` of a tensor of unknown dtype, and decomposing that
# dereferences its dtype.
CONTRACT_CRASH = """
module {
  func.func @main(%arg0: !torch.vtensor<[3,3,3],f32>, %arg1: !torch.float, %arg2: !torch.bool, %arg3: !torch.list<int>) -> !torch.tensor {
    %0 = torch.tensor_static_info_cast %arg0 : !torch.vtensor<[3,3,3],f32> to !torch.vtensor
    %1 = torch.copy.to_tensor %0 : !torch.tensor
    %2 = torch.aten.norm.ScalarOpt_dim %1, %arg1, %arg3, %arg2 : !torch.tensor, !torch.float, !torch.list<int>, !torch.bool -> !torch.tensor
    %3 = torch.aten.expand_as %2, %1 : !torch.tensor, !torch.tensor -> !torch.tensor
    %4 = torch.aten.hardswish %3 : !torch.tensor -> !torch.tensor
    return %4 : !torch.tensor
  }
}
"""
CONTRACT = "torch-lower-to-backend-contract{ decompose=true extra-library= max-iterations=10 shape-dtype-refine=true}"


# amax over every dim of an si64 tensor, reshaped: torch-mlir 20261001 segfaults while it
# simplifies the ops' shape calculations (a campaign's seed 93).
AMAX_RESHAPE = """
module {
  func.func @main(%arg0: !torch.vtensor<[3,1,4],si64>) -> !torch.vtensor {
    %int-1 = torch.constant.int -1
    %int2 = torch.constant.int 2
    %int1 = torch.constant.int 1
    %int0 = torch.constant.int 0
    %true = torch.constant.bool true
    %0 = torch.prim.ListConstruct %int0, %int1, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %1 = torch.aten.amax %arg0, %0, %true : !torch.vtensor<[3,1,4],si64>, !torch.list<int>, !torch.bool -> !torch.vtensor
    %2 = torch.prim.ListConstruct %int-1, %int1, %int1 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %3 = torch.aten.reshape %1, %2 : !torch.vtensor, !torch.list<int> -> !torch.vtensor
    return %3 : !torch.vtensor
  }
}
"""


@pytest.mark.parametrize(
    "text, first, last, guilty",
    [
        (CONTRACT_CRASH, "torch-decompose-complex-ops", "torch-decompose-complex-ops", "torch.aten.hardswish"),
        # while the ops are wrapped in their shape functions: from where they were wrapped
        # (the crash's native frames name the fold that crashes: `AtenReshapeOp::fold`)
        (AMAX_RESHAPE, "torch-reify-shape-calculations", "torch-simplify-shape-calculations", "torch.aten.reshape"),
    ],
    ids=["decomposition", "shape-calculation"],
)
def test_a_crash_in_the_contract_pass_is_reduced_in_the_inner_passes_it_dies_in(tmp_path, text, first, last, guilty):
    # The contract pass iterates torch-mlir's simplification pipeline up to ten times; a
    # candidate that no longer crashes ran all ten and failed the contract check, 1-2 s a
    # query, so such reductions hit their time box. Replayed pass by pass inside, the crash
    # is in a few passes, whose queries take milliseconds.
    localized = localize_crash(text, [CONTRACT], "torch-backend")
    assert localized is not None and "Segmentation fault" in localized.case.signature.format()
    pipeline = localized.case.pipeline
    assert first in pipeline[0] and last in pipeline[-1] and not any(CONTRACT_PASS in p for p in pipeline), pipeline
    outcome = reduce_mlir(
        text, [CONTRACT], "torch-backend", crash=True, test="T", config="c", reports_dir=tmp_path, time_box=40
    )
    assert outcome.bundle is not None and outcome.verified and outcome.stopped == "1-minimal", outcome.note
    assert guilty in outcome.guilty_op.split(", ")
    assert op_count((outcome.bundle / "repro.mlir").read_text().split("{-#")[0]) <= 10
    assert "torch-mlir-opt --pass-pipeline=" in (outcome.bundle / "README.md").read_text()  # crashes too


# logsumexp over dims the program is given at run time, then group_norm of the result:
# torch-mlir 20261001's torch-decompose-complex-ops never ends on it (the campaigns' seed 998,
# on torchscript, reduced by hand).
GROUP_NORM_HANG = """
module {
  func.func @main(%arg0: !torch.vtensor<[4,2,3],f32>, %arg1: !torch.vtensor<[1],f32>, %arg2: !torch.vtensor<[1],f32>,
                  %arg3: !torch.bool, %arg4: !torch.list<int>) -> !torch.tensor {
    %0 = torch.tensor_static_info_cast %arg0 : !torch.vtensor<[4,2,3],f32> to !torch.vtensor
    %1 = torch.copy.to_tensor %0 : !torch.tensor
    %2 = torch.tensor_static_info_cast %arg1 : !torch.vtensor<[1],f32> to !torch.vtensor
    %3 = torch.copy.to_tensor %2 : !torch.tensor
    %4 = torch.tensor_static_info_cast %arg2 : !torch.vtensor<[1],f32> to !torch.vtensor
    %5 = torch.copy.to_tensor %4 : !torch.tensor
    %true = torch.constant.bool true
    %int1 = torch.constant.int 1
    %eps = torch.constant.float 1.000000e-05
    %6 = torch.aten.logsumexp %1, %arg4, %true : !torch.tensor, !torch.list<int>, !torch.bool -> !torch.tensor
    %7 = torch.aten.group_norm %6, %int1, %3, %5, %eps, %arg3
        : !torch.tensor, !torch.int, !torch.tensor, !torch.tensor, !torch.float, !torch.bool -> !torch.tensor
    return %7 : !torch.tensor
  }
}
"""


def test_a_hang_in_the_contract_pass_is_localized_to_the_inner_pass_it_hangs_in():
    """A hang inside `torch-lower-to-backend-contract` is replayed pass by pass and its case
    runs the pass it hangs in, on that pass's input: each query of its reduction runs one
    pass, and its bundle names the pass a torch-mlir developer looks at."""
    localized = localize_crash(GROUP_NORM_HANG, [CONTRACT], "torch-backend", timeout=10, hang=True)
    assert localized is not None and localized.case.kind == "hang"
    assert localized.case.pipeline == ["func.func(torch-decompose-complex-ops{})"], localized.case.pipeline
    assert localized.case.signature.format() == "timeout | torch-backend"
    assert "torch.aten.group_norm" in localized.ir


def test_miscompile_found_node_by_node(tmp_path):
    chain = stage_pipelines(load_config("linalg"))["backend"]
    broken = [*chain[: -len(LOWER_PIPELINE)], BROKEN + "mulf_to_addf", *LOWER_PIPELINE]
    outcome = reduce_mismatch(
        Mixed(), [torch.rand(3, 4), torch.rand(3, 4)], broken, test="T", config="c", reports_dir=tmp_path, time_box=40
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.mul.Tensor"
    assert (outcome.bundle / "inputs.npz").exists() and (outcome.bundle / "expected.npz").exists()
    assert op_count((outcome.bundle / "repro.mlir").read_text().split("{-#")[0]) <= 5
    assert run_repro(outcome.bundle).returncode == 1
    # The same pipeline without the broken rewrite computes the expected values.
    outcome_ok = reduce_mismatch(
        Mixed(), [torch.rand(3, 4), torch.rand(3, 4)], chain, test="T2", config="c", reports_dir=tmp_path, time_box=40
    )
    assert outcome_ok.bundle is None


def test_torchscript_miscompile_found_in_the_torchscript_graph(tmp_path):
    """The search the torchscript config falls back to when the FX re-export agrees."""
    chain = stage_pipelines(load_config("torchscript"))["backend"]
    broken = [*chain[: -len(LOWER_PIPELINE)], BROKEN + "mulf_to_addf", *LOWER_PIPELINE]
    inputs = [torch.rand(3, 4), torch.rand(3, 4)]
    frontend = load_config("torchscript").toolchain().frontend
    outcome = reduce_jit_mismatch(
        Mixed(), inputs, broken, frontend=frontend, test="T", config="torchscript", reports_dir=tmp_path, time_box=60
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "torch.aten.mul"
    repro = (outcome.bundle / "repro.mlir").read_text().split("{-#")[0]
    assert "torch.aten.mul.Tensor" in repro and "torch.aten.exp" not in repro  # the node alone
    assert "localized in the TorchScript graph" in (outcome.bundle / "README.md").read_text()
    assert run_elsewhere(outcome.bundle, tmp_path).returncode == 1
    fine = reduce_jit_mismatch(
        Mixed(), inputs, chain, frontend=frontend, test="T2", config="torchscript", reports_dir=tmp_path, time_box=60
    )
    assert fine.bundle is None and "agrees with TorchScript's own run" in fine.note


class DynamicMatmul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)  # exported as view(a, [s0*s1, 8]) -> mm -> view


def test_dynamic_view_miscompile_ends_in_five_ops(tmp_path):
    """The linalg xfails Matmul3d2d/Linear3d_DynamicLeadingDims: a dynamic `view` flattening two dims."""
    chain = stage_pipelines(load_config("linalg"))["backend"]
    outcome = reduce_mismatch(
        DynamicMatmul(),
        [torch.rand(3, 4, 8), torch.rand(8, 5)],
        chain,
        test="T",
        config="linalg",
        reports_dir=tmp_path,
        arg_shapes=[[-1, -1, 8], [8, 5]],
        time_box=60,
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.view.default" and outcome.ops_after <= 5
    repro = (outcome.bundle / "repro.mlir").read_text()
    assert "!torch.vtensor<[?,?,8],f32>" in repro and "torch.aten.view" in repro
    assert "expected [12, 8], got [3, 8]" in (outcome.bundle / "README.md").read_text()
    # Static shapes: no bug to see, and the reducer says why it has no bundle.
    static = reduce_mismatch(
        DynamicMatmul(),
        [torch.rand(3, 4, 8), torch.rand(8, 5)],
        chain,
        test="T2",
        config="linalg",
        reports_dir=tmp_path,
        time_box=30,
    )
    assert static.bundle is None and "agrees" in static.note and "stopped=no-localization" in static.summary()


def test_same_signature_shares_one_bundle(tmp_path):
    pipeline = [*TORCH_BACKEND_TO_LINALG, BROKEN + "reject_exp"]
    first = reduce_mlir(
        torch_backend_ir(), pipeline, "backend", test="A", config="c", reports_dir=tmp_path, verify=False
    )
    second = reduce_mlir(torch_backend_ir(), pipeline, "backend", test="B", config="c", reports_dir=tmp_path)
    assert second.shared and second.bundle == first.bundle
    assert (first.bundle / "tests.txt").read_text().split() == ["A", "[c]", "B", "[c]"]


@pytest.mark.parametrize(
    "one, other",
    [
        (
            "loc(\"/a/b.py\":3:4): 'tosa.reshape' op expected [3,4] at 0x7f00aa %12",
            "loc(\"/x/y.py\":9:1): 'tosa.reshape' op expected [5,6] at 0x1234 %arg0",
        ),
        ("error: /tmp/e2e-child-abc.stderr:12: failed 4x8xf32", "error: /home/u/q.mlir:3: failed 2x2xf32"),
        (
            "LLVM ERROR: SmallVector unable to grow. Requested capacity (94816684595416) is larger than maximum value for size type (4294967295)",
            "LLVM ERROR: SmallVector unable to grow. Requested capacity (94472229991848) is larger than maximum value for size type (4294967295)",
        ),
    ],
)
def test_normalization_forgets_what_varies(one, other):
    assert normalize(one) == normalize(other)
    assert (
        stage_signature("backend", one, "func.func(convert-torch-to-tosa{x=1})")
        .format()
        .startswith("backend | convert-torch-to-tosa |")
    )


def test_signature_helpers():
    assert normalize("'tosa.add' op failed") != normalize("'tosa.sub' op failed")
    assert (
        crash_signature("lower", "noise\nLLVM ERROR: bad at 0xdead\n", "killed by SIGABRT").format()
        == "crash | lower | LLVM ERROR: bad at <addr>"
    )
    assert crash_signature("lower", "", "killed by SIGABRT").format() == "crash | lower | killed by SIGABRT"
    assert (
        guilty_op(["loc: failed to legalize operation 'torch.aten.asin' that was explicitly marked illegal"])
        == "torch.aten.asin"
    )
    assert (
        guilty_op(
            [
                "loc: failed to legalize operation 'torch.operator' that was explicitly marked illegal: "
                '%v = "torch.operator"(%v) <{name = "aten.vstack"}> : (!torch.list<tensor>) -> !torch.tensor'
            ]
        )
        == "aten.vstack"
    )
    assert (
        guilty_op(
            [
                "loc: op was not bufferized",
                '  note: loc: see current operation: %28 = "stablehlo.dynamic_broadcast_in_dim"(%0) : () -> ()',
            ]
        )
        == "stablehlo.dynamic_broadcast_in_dim"
    )


def test_reproducer_resource_joins_existing_resources():
    text = "module {\n}\n\n{-#\n  dialect_resources: {\n    builtin: {}\n  }\n#-}\n"
    joined = with_reproducer_resource(text, ["canonicalize"])
    assert joined.count("{-#") == 1 and 'pipeline: "builtin.module(canonicalize)"' in joined
    from compiler.replay_runtime.replay import strip_reproducer_resource
    from compiler.stages import parse_module

    parse_module(joined)
    # The replay drops the reproducer entry alone: the weights stay (NanInf_Clamp's onnx bundle lost them).
    weights = text.replace("builtin: {}", 'builtin: {\n      w: "0x08000000000080BF"\n    }')
    assert 'w: "0x08000000000080BF"' in strip_reproducer_resource(with_reproducer_resource(weights, ["canonicalize"]))


def test_an_empty_shape_is_not_mistaken_for_an_address():
    assert "tensor<Nxf32>" in normalize("'tensor.cast' op operand type 'tensor<0xf32>' is bad")


def test_torch_level_miscompile_blames_the_rewritten_op(tmp_path):
    chain = stage_pipelines(load_config("linalg"))["backend"]
    broken = [BROKEN + "aten_sub_to_add", *chain]
    outcome = reduce_mismatch(
        Mixed(), [torch.rand(3, 4), torch.rand(3, 4)], broken, test="T", config="c", reports_dir=tmp_path, time_box=60
    )
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.sub.Tensor" and outcome.ops_after <= 4


ASSERTING_LOWER_IR = (
    "func.func @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {\n"
    "  %false = arith.constant false\n"
    '  cf.assert %false, "unimplemented: only fixed strides"\n'
    "  %0 = tensor.empty() : tensor<3x4xf32>\n"
    "  %1 = linalg.add ins(%arg0, %arg0 : tensor<3x4xf32>, tensor<3x4xf32>) outs(%0 : tensor<3x4xf32>) -> tensor<3x4xf32>\n"
    "  return %1 : tensor<3x4xf32>\n}\n"
)


def _reduce_execute_crash(
    tmp_path, test: str = "T", *, snapshot: str = "4-lower.mlir", ir=ASSERTING_LOWER_IR, inputs=None, check_types=True
):
    """A linalg pair of `test` that crashed in execute, its stage input `ir` saved as
    `snapshot`, reduced under `tmp_path`; `inputs`: its real inputs (None: no prepared test)."""
    from types import SimpleNamespace

    from e2e.reducer.strategies import reduce_result

    ir_dir = tmp_path / "ir" / test / "linalg"
    ir_dir.mkdir(parents=True)
    (ir_dir / snapshot).write_text(ir)
    prepared = None if inputs is None else SimpleNamespace(failing_call=lambda index: ("forward", inputs))
    signature = Signature("crash", "execute", "killed by SIGABRT")
    result = SimpleNamespace(test=test, outcome="crash", stage="execute", failing_call=0, signature=signature)
    return reduce_result(result, prepared, load_config("linalg"), tmp_path, time_box=60, check_types=check_types)


def test_execute_crash_reduces_to_the_failing_assert(tmp_path):
    outcome = _reduce_execute_crash(tmp_path)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "cf.assert" and outcome.ops_after <= 3
    # The crash state names the assert that failed, not only the abort.
    assert "Aborted: unimplemented: only fixed strides" in (outcome.bundle / "README.md").read_text()


# The crash, then code compiled for a dynamic dim that must be 2 (it broadcasts against a 2),
# with a check the real input ([1, 4, 2]) passes and made-up inputs (a dim of 3) fail.
CHECKED_AND_CRASHING_LOWER_IR = """
func.func @main(%arg0: tensor<1x4x?xi64>) -> tensor<1x4x?xi64> {
  %false = arith.constant false
  cf.assert %false, "the crash"
  %c2 = arith.constant 2 : index
  %dim = tensor.dim %arg0, %c2 : tensor<1x4x?xi64>
  %0 = arith.cmpi eq, %dim, %c2 : index
  cf.assert %0, "mismatched size for broadcast"
  return %arg0 : tensor<1x4x?xi64>
}
"""


def test_an_execute_crash_is_replayed_on_the_real_inputs_sizes_not_made_up_ones(tmp_path):
    # With made-up sizes the size check crashes too, under the same signature: a campaign's
    # execute crash reduced to that check alone, a crash the real inputs never hit.
    real = [torch.zeros(1, 4, 2, dtype=torch.int64)]
    outcome = _reduce_execute_crash(tmp_path, ir=CHECKED_AND_CRASHING_LOWER_IR, inputs=real)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    repro = (outcome.bundle / "repro.mlir").read_text().split("{-#")[0]
    assert "the crash" in repro and "mismatched size" not in repro, repro
    assert 'e2e.main_signature = "(tensor<1x4x2xi64>) ->' in repro  # the made-up inputs' sizes: the real ones
    # The size check alone crashes on made-up sizes, and not on the real ones.
    check_only = CHECKED_AND_CRASHING_LOWER_IR.replace('cf.assert %false, "the crash"', "")
    case = Case(CRASH, "execute", stage_pipelines(load_config("linalg"))["execute"], Signature("crash", "execute"))
    assert observe(case, check_only) is not None and observe(case, give_input_sizes(check_only, [[1, 4, 2]])) is None


# A valid program torch-mlir 20261001 compiles to one that aborts: `view` of merged dynamic
# dims ([2,2,2] -> [1,8]) gets the wrong size (llvm/torch-mlir#4743), and `mm`'s own size check
# then fails at run time ("mismatching contracting dimension"). `%arg2` is a `[1,?]` of [1,2].
VIEW_THEN_MM = """
func.func @main(%arg0: !torch.vtensor<[?,?,2],si64>, %arg1: !torch.vtensor<[8,1],si64>, %arg2: !torch.vtensor<[1,?],si64>) -> !torch.vtensor<[1,1],si64> {
  %int8 = torch.constant.int 8
  %int1 = torch.constant.int 1
  %0 = torch.prim.ListConstruct %int1, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.view %arg0, %0 : !torch.vtensor<[?,?,2],si64>, !torch.list<int> -> !torch.vtensor<[1,?],si64>
  %2 = torch.aten.neg %arg1 : !torch.vtensor<[8,1],si64> -> !torch.vtensor<[8,1],si64>
  %3 = torch.aten.mm %1, %2 : !torch.vtensor<[1,?],si64>, !torch.vtensor<[8,1],si64> -> !torch.vtensor<[1,1],si64>
  return %3 : !torch.vtensor<[1,1],si64>
}
"""


def test_an_execute_crash_is_reduced_as_the_torch_program_that_compiles_to_it(tmp_path):
    # Reduced as lowered IR, such a crash keeps the failing check alone (`cf.assert %false`),
    # which shows nothing of the ops that made it.
    real = [torch.zeros(2, 2, 2, dtype=torch.int64), torch.zeros(8, 1, dtype=torch.int64), torch.zeros(1, 2)]
    outcome = _reduce_execute_crash(tmp_path, snapshot="3-backend.mlir", ir=VIEW_THEN_MM, inputs=real)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    # `neg` is not needed (a static value stands in for it); `view` stays: `%arg2`, a `[1,?]`
    # too, does not stand in for its result (then `mm` of [1,2] and [8,1] fails its check too).
    # The guilty op: the one whose lowering wrote the assert that fails (its location says).
    assert outcome.guilty_op == "torch.aten.view", outcome.guilty_op


def test_a_failure_sharing_a_bundle_is_not_type_checked_again(tmp_path, monkeypatch):
    # The type check replays the pair's torch-backend stage (about a second a pair); a failure
    # that shares a bundle is a bug already checked for the bundle.
    import e2e.reducer.strategies as strategies

    checked = []
    real = strategies.types_broke
    monkeypatch.setattr(strategies, "types_broke", lambda pair, *a: checked.append(pair.result.test) or real(pair, *a))
    first, again = _reduce_execute_crash(tmp_path, "First"), _reduce_execute_crash(tmp_path, "Again")
    assert first.stopped != "shared" and again.stopped == "shared" and again.bundle == first.bundle
    assert checked == ["First"]


def test_a_campaign_blocks_reduction_leaves_the_type_check_to_its_triage(tmp_path, monkeypatch):
    # `--reduce-unnamed` (a campaign's blocks): the campaign's triage checks each bug's types
    # once (`e2e.fuzz.triage.check_types`), so the block's reducer does not replay them.
    import e2e.reducer.strategies as strategies

    checked = []
    real = strategies.types_broke
    monkeypatch.setattr(strategies, "types_broke", lambda pair, *a: checked.append(pair.result.test) or real(pair, *a))
    outcome = _reduce_execute_crash(tmp_path, "InBlock", check_types=False)
    assert outcome.bundle is not None and outcome.verified and checked == []


def test_lazy_capture_failure_becomes_a_torch_script(tmp_path):
    """An op LTC cannot lower: the bundle is the one-node FX graph, run with torch alone."""
    import e2e.test_suite.elementwise_binary  # noqa: F401  (registers Binary_Atan2SameShape)
    from e2e.framework.prepared import prepare
    from e2e.framework.registry import GLOBAL_TEST_REGISTRY
    from e2e.framework.runner import run_pair
    from e2e.reducer.strategies import reduce_result

    prepared = prepare(GLOBAL_TEST_REGISTRY["Binary_Atan2SameShape"])
    prepared.shape_mode = "static"  # ltc traces static shapes: a dynamic test is not applicable
    config = load_config("ltc")
    result = run_pair(prepared, config, reports_dir=tmp_path, limits=Limits(120, None))
    assert result.stage == "capture" and "aten::atan2" in result.signature.format()
    outcome = reduce_result(result, prepared, config, tmp_path, time_box=30)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.atan2.default" and outcome.ops_after == 1
    done = run_elsewhere(outcome.bundle, tmp_path)
    assert done.returncode == 1 and "aten::atan2" in done.stdout


class ViewAfterAttention(torch.nn.Module):
    """GPT-2's attention epilogue: torch's decomposition of SDPA leaves strides the
    following `view` cannot take, so capture fails in its `decompositions` step."""

    def forward(self, q, k, v):
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return attended.transpose(1, 2).reshape(2, 8, 32).view(-1, 32)


def test_a_failure_in_torchs_decompositions_replays_with_torch_alone(tmp_path):
    """The bundle's replay labels the export and decomposition steps as the suite's capture
    does (before, every such bundle replayed as `torch.export` and failed verification), and
    needs only the few decompositions of torch's that still fail, spelled by name."""
    from e2e.framework.prepared import prepare
    from e2e.framework.registry import Test
    from e2e.framework.runner import run_pair
    from e2e.reducer.strategies import reduce_result

    def invoke(module, tu):
        module.forward(tu.rand(2, 4, 8, 8), tu.rand(2, 4, 8, 8), tu.rand(2, 4, 8, 8))

    prepared = prepare(Test("ViewAfterAttention", ViewAfterAttention, invoke))
    config = load_config("linalg")
    result = run_pair(prepared, config, reports_dir=tmp_path, limits=Limits(120, None))
    assert result.stage == "capture" and "decompositions: ValueError: Cannot view" in result.signature.format()
    outcome = reduce_result(result, prepared, config, tmp_path, time_box=60)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.ops_after <= 4
    repro = (outcome.bundle / "repro.py").read_text()
    assert "DECOMPOSITIONS = [(" in repro and "scaled_dot_product" in repro
    done = run_elsewhere(outcome.bundle, tmp_path, blocked=(*PROJECT, "torch_mlir"))
    assert done.returncode == 1 and "decompositions: ValueError" in done.stdout, done.stdout + done.stderr


def test_a_replayed_failure_matches_its_report_behind_the_frontends_prefix_and_the_cut():
    from e2e.reducer.failure import _same_failure

    stage = ("torch-backend", "torch-lower-to-backend-contract")
    replayed = Signature(
        *stage, "loc: failed to legalize operation 'torch.operator' that was explicitly marked illegal: %v:2 = rest"
    )
    reported = Signature(
        *stage,
        "ops unknown to the torch dialect (imported as torch.operator): aten.gru.input; "
        "loc: failed to legalize operation 'torch.operator' that was expl",
    )  # cut at 300 characters
    assert _same_failure(replayed, reported)
    assert not _same_failure(replayed, Signature(*stage, "loc: failed to legalize operation 'torch.aten.mm'"))
    assert not _same_failure(replayed, Signature("backend", "convert-torch-to-linalg", replayed.message))


def abort_on_aten_exp(module) -> None:
    """A broken compiler for the test below: any `torch.aten.exp` takes the process down."""
    from tests.broken_compilers import _abort_on

    _abort_on(module, "torch.aten.exp")


class ExpThenWrongSub(torch.nn.Module):
    def forward(self, x, y):
        return torch.exp(x) - y


def test_a_crashing_candidate_answers_its_query_and_the_search_goes_on():
    from e2e.reducer.graph import GraphSearch

    # The whole graph crashes (exp), its `sub` alone miscompiles (sub lowered as add).
    to_executor = [
        f"{BROKEN}aten_sub_to_add",
        "python:tests.test_reducer:abort_on_aten_exp",
        *stage_pipelines(load_config("linalg"))["backend"],
    ]
    search = GraphSearch(ExpThenWrongSub(), [torch.rand(3, 4), torch.rand(3, 4)], to_executor)
    assert search.check(search.units) is None and search.crashed_queries == 1  # answered, not fatal
    found = search.check([u for u in search.units if "sub" in u])
    assert found is not None and found[0].stage == "compare"


def test_a_hanging_pass_is_found_and_reduced_to_a_repro_that_ends_by_sigalrm(tmp_path, monkeypatch):
    import signal
    from types import SimpleNamespace

    from e2e.reducer import failure, localize
    from e2e.reducer.strategies import reduce_result

    # Short enough for a unit test, long enough that a loaded machine's fork and compile of a
    # candidate that does not hang is not taken for a hang.
    monkeypatch.setattr(failure, "HANG_LOCALIZE_SECONDS", 10.0)
    monkeypatch.setattr(localize, "HANG_SECONDS", 5.0)
    ir_dir = tmp_path / "ir" / "T" / "stuck"
    ir_dir.mkdir(parents=True)
    (ir_dir / "4-lower.mlir").write_text(
        "func.func @main(%arg0: f32, %arg1: f32) -> f32 {\n"
        "  %0 = arith.addf %arg0, %arg1 : f32\n"
        "  %1 = arith.mulf %0, %arg1 : f32\n"
        "  %2 = math.tanh %1 : f32\n"
        "  %3 = arith.subf %2, %arg0 : f32\n"
        "  return %3 : f32\n}\n"
    )
    # The stage's passes: one that works, then one that never returns on math.tanh.
    stages = {"lower": ["func.func(canonicalize)", BROKEN + "hang_on_tanh"]}
    config = SimpleNamespace(
        name="stuck", toolchain=lambda: SimpleNamespace(stages=stages, frontend=load_frontend("fx"))
    )
    result = SimpleNamespace(test="T", outcome="timeout", stage="lower", signature=Signature("timeout", "lower"))
    outcome = reduce_result(result, None, config, tmp_path, time_box=30)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    case = json.loads((outcome.bundle / "case.json").read_text())
    assert case["kind"] == "hang" and case["pipeline"] == [BROKEN + "hang_on_tanh"]
    assert outcome.guilty_op == "math.tanh" and outcome.ops_after <= 2
    elsewhere = run_elsewhere(outcome.bundle, tmp_path)
    assert elsewhere.returncode == -signal.SIGALRM, elsewhere.stdout + elsewhere.stderr
    from e2e.fuzz.regressions import verify_bundle

    assert verify_bundle(outcome.bundle)  # a campaign counts a hang's bundle as verified


@pytest.mark.parametrize(
    "outcome, stage, frontend, onnx_model, expected",
    [
        ("timeout", "compare", "fx", False, ["Hang"]),
        ("fail", "compare", "onnx", False, ["OnnxMismatch"]),
        ("fail", "compare", "fx", False, ["FxMismatch"]),
        ("fail", "compare", "torchscript", False, ["FxMismatch", "JitGraphMismatch"]),
        ("fail", "import", "onnx", True, ["OwnOnnxModel"]),
        ("fail", "capture", "fx", False, ["FrontendFailure"]),
        ("crash", "execute", "fx", False, ["ExecuteCrash"]),
        ("crash", "import", "fx", False, ["StageCrash"]),
        ("crash", "lower", "fx", False, ["StageCrash"]),
        ("fail", "backend", "fx", False, ["PassError"]),
    ],
)
def test_each_failing_pair_is_taken_by_its_strategies(outcome, stage, frontend, onnx_model, expected):
    from types import SimpleNamespace

    from e2e.reducer.pair import FailingPair
    from e2e.reducer.strategies import candidates

    module = SimpleNamespace(onnx_model=b"model" if onnx_model else None)
    config = SimpleNamespace(name="c", toolchain=lambda: SimpleNamespace(frontend=load_frontend(frontend)))
    pair = FailingPair(
        SimpleNamespace(test="T", outcome=outcome, stage=stage), SimpleNamespace(module=module), config, ""
    )
    assert [type(strategy).__name__ for strategy in candidates(pair)] == expected


class Scale(torch.nn.Module):
    def forward(self, x, y):
        return torch.exp(x) * y


def test_a_bf16_miscompile_gets_a_bundle_that_keeps_bf16_as_its_bit_pattern(tmp_path):
    """numpy has no bfloat16: inputs.npz and expected.npz hold int16 bit patterns, which
    the replay reads back as bf16 (@main's argument types, the case's result dtypes)."""
    chain = stage_pipelines(load_config("linalg"))["backend"]
    broken = [*chain[: -len(LOWER_PIPELINE)], BROKEN + "mulf_to_addf", *LOWER_PIPELINE]
    inputs = [torch.rand(3, 4, dtype=torch.bfloat16), torch.rand(3, 4, dtype=torch.bfloat16)]
    outcome = reduce_mismatch(Scale(), inputs, broken, test="T", config="c", reports_dir=tmp_path, time_box=40)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.mul.Tensor"
    with np.load(outcome.bundle / "inputs.npz") as arrays:
        assert {arrays[k].dtype for k in arrays.files} == {np.dtype(np.int16)}
    assert run_repro(outcome.bundle).returncode == 1


def test_a_bundle_is_checked_with_the_wheels_torch_mlir_opt_binary_not_its_python_launcher():
    from e2e.reducer.upstream_tools import torch_mlir_opt

    opt = Path(torch_mlir_opt())
    assert opt.read_bytes()[:4] == b"\x7fELF", opt  # the console script on PATH starts Python first
