"""A bundle's one upstream command and its issue-ready README (e2e/reducer/upstream.py,
issue.py), on hand-written torch IR: the command names no Python pass, runs on the step's
own input, and shows the bundle's failure with the upstream tool where one can."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from compiler.pipelines import TORCH_BACKEND_TO_LINALG
from compiler.replay_runtime.replay import CRASH, ERROR, MISMATCH, Case, compile_signature
from compiler.replay_runtime.signature import Signature
from compiler.type_check import TYPES_AGREE
from e2e.reducer import upstream_tools
from e2e.reducer.bundle import BundleInfo, write_bundle
from e2e.reducer.issue import issue_of
from e2e.reducer.upstream import (
    IREE,
    MLIR_UPSTREAM,
    STABLEHLO,
    TORCH_MLIR,
    UPSTREAM_IR,
    NoStep,
    UpstreamStep,
    component_of,
    step_of,
    upstream,
)

pytestmark = pytest.mark.skipif(upstream_tools.torch_mlir_opt() is None, reason="needs torch-mlir-opt")

BROKEN = "python:tests.broken_compilers:"
MATCH_QUANTIZED = "func.func(torch-match-quantized-custom-ops)"

# `where(c, x, x)` folds to `x`, which drops the broadcast to c's shape: after the fold,
# @main returns a [] value where it declares [4] (the verifier's error, after the pass).
WHERE_FOLD = """
func.func @main(%arg0: !torch.vtensor<[],f32>, %arg1: !torch.vtensor<[4],i1>, %arg2: !torch.vtensor<[],f32>) -> !torch.vtensor<[4],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.sub.Tensor %arg0, %arg2, %int1 : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],f32>
  %1 = torch.aten.where.self %arg1, %0, %0 : !torch.vtensor<[4],i1>, !torch.vtensor<[],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[4],f32>
  return %1 : !torch.vtensor<[4],f32>
}
"""

# `aten.any.dims` folded on an unranked result while adjusting the calling conventions:
# torch-mlir 20261001 dereferences its missing sizes (SIGSEGV).
ANY_DIMS = """
func.func @main(%arg0: !torch.tensor {torch.type_bound = !torch.vtensor<[2,3],f32>}) -> !torch.tensor {
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %0 = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %1 = torch.aten.any.dims %arg0, %0, %false : !torch.tensor, !torch.list<int>, !torch.bool -> !torch.tensor
  return %1 : !torch.tensor
}
"""

SUB = """
func.func @main(%arg0: !torch.vtensor<[2,3],f32>, %arg1: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.sub.Tensor %arg0, %arg1, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}
"""


def error_case(text: str, pipeline: list[str]) -> Case:
    signature, _ = compile_signature(text, "torch-backend", pipeline, pipeline[-1])
    assert signature is not None and signature.stage == "torch-backend", signature
    return Case(ERROR, "torch-backend", pipeline, signature, guilty_op="func.return")


def record(bundle) -> dict:
    return json.loads((bundle / "bundle.json").read_text())


def test_an_error_bundle_gives_the_upstream_command_that_fails_with_its_diagnostic(tmp_path):
    case = error_case(WHERE_FOLD, [MATCH_QUANTIZED])
    bundle = tmp_path / "repro" / "T" / "linalg"
    info = BundleInfo("T", "linalg", case, WHERE_FOLD, WHERE_FOLD, 3, 3, minimal=True)
    verified, detail = write_bundle(info, bundle, timeout=60)
    assert verified, detail
    fields = record(bundle)
    assert fields["upstream_command"] == (
        f"torch-mlir-opt --pass-pipeline='builtin.module({MATCH_QUANTIZED})' {UPSTREAM_IR}"
    )
    assert fields["upstream_tool"] == "torch-mlir-opt" and fields["upstream_exit"] == 1
    assert fields["upstream_fails"] is True
    # the very diagnostic the bundle's signature holds, from the tool
    assert "type of return operand 0 ('!torch.vtensor<[],f32>') doesn't match" in fields["upstream_output"]
    assert "type of return operand 0 ('!torch.vtensor<[],f32>') doesn't match" in case.signature.message
    assert "mlir_reproducer" not in (bundle / UPSTREAM_IR).read_text()


def test_a_pipeline_with_python_passes_gives_a_command_of_upstream_passes_on_their_output(tmp_path):
    # The project's pass before the step (a broken rewrite) and its check after it: neither
    # is in the command; the command reads what the project's pass made.
    pipeline = [BROKEN + "aten_sub_to_add", TYPES_AGREE, MATCH_QUANTIZED, TYPES_AGREE]
    case = error_case(WHERE_FOLD, pipeline[:3])
    case.pipeline = pipeline
    found = upstream(case, WHERE_FOLD, tmp_path, run=True)
    step = found.step
    assert isinstance(step, UpstreamStep), step
    assert "python:" not in step.command and step.entries == (MATCH_QUANTIZED,)
    assert step.before == (BROKEN + "aten_sub_to_add",)  # the check changes nothing: not run for the input
    given = (tmp_path / UPSTREAM_IR).read_text()
    assert "torch.aten.add.Tensor" in given and "torch.aten.sub.Tensor" not in given
    # The bundle's check after the step judges it, not the tool: not known, never a guess.
    assert step.judged_by is not None and found.run.fails is None and found.run.exit == 1


def test_a_failing_step_that_is_the_projects_own_pass_has_no_upstream_command(tmp_path):
    case = Case(ERROR, "backend", [*TORCH_BACKEND_TO_LINALG, BROKEN + "reject_exp"], Signature("backend", "reject_exp"))
    found = upstream(case, SUB, tmp_path, run=True)
    assert isinstance(found.step, NoStep) and "reject_exp" in found.step.why
    assert found.record()["upstream_command"] is None and not (tmp_path / UPSTREAM_IR).exists()


@pytest.mark.skipif(shutil.which("llvm-symbolizer") is None, reason="needs llvm-symbolizer (apt install llvm)")
def test_a_crash_bundle_runs_the_tool_in_a_process_of_its_own_and_keeps_its_frames(tmp_path):
    from e2e.reducer.case import observe

    pipeline = ["torch-adjust-calling-conventions"]
    # The crash as the suite signs it: its crash state (native frames) included.
    signature = observe(Case(CRASH, "torch-backend", pipeline, Signature("crash", "torch-backend")), ANY_DIMS)
    case = Case(CRASH, "torch-backend", pipeline, signature, guilty_op="torch.aten.any.dims")
    bundle = tmp_path / "repro" / "T" / "torchscript"
    notes = [f"localized from {bundle}/original.mlir"]  # an absolute path the README must not keep
    info = BundleInfo("T", "torchscript", case, ANY_DIMS, ANY_DIMS, 3, 3, minimal=True, notes=notes)
    verified, detail = write_bundle(info, bundle, timeout=60)
    assert verified, detail
    fields = record(bundle)
    assert fields["upstream_exit"] < 0 and fields["upstream_fails"] is True  # died by a signal, this process lives
    assert "killed by SIGSEGV" in fields["upstream_output"]
    assert "mlir::torch::Torch::AtenAnyDimsOp::fold" in fields["upstream_frames"][:3]

    readme = (bundle / "README.md").read_text()
    title, _, rest = readme.partition("\n")
    assert title == (
        "# [torch-mlir] torch-adjust-calling-conventions crashes (SIGSEGV) in AtenAnyDimsOp::fold on torch.aten.any.dims"
    )
    assert "- component: torch-mlir pass (`torch-adjust-calling-conventions`)" in rest
    assert (
        "```sh\ntorch-mlir-opt --pass-pipeline='builtin.module(torch-adjust-calling-conventions)' upstream.mlir\n```"
        in rest
    )
    assert "It needs torch-mlir-opt from the torch-mlir wheel, and reads `upstream.mlir`" in rest
    assert rest.index("## Upstream command") < rest.index("## Reproduce")
    assert str(tmp_path) not in readme and not re.search(r"(?<![\w.])/work/", readme)
    assert "localized from original.mlir" in readme


def test_a_tool_that_dies_another_death_does_not_show_the_crash(tmp_path):
    # The same module, a case whose process aborted: a segfault in the tool is another bug.
    aborted = Signature("crash", "torch-backend", "Fatal Python error: Aborted")
    case = Case(CRASH, "torch-backend", ["torch-adjust-calling-conventions"], aborted, guilty_op="torch.aten.any.dims")
    found = upstream(case, ANY_DIMS, tmp_path, run=True)
    assert found.run.exit < 0 and found.run.fails is False


def test_an_execute_crash_is_titled_by_its_lowering_and_its_ops_and_left_to_repro_py(tmp_path):
    pipeline = [*TORCH_BACKEND_TO_LINALG, "python:compiler.replay_runtime.passes:invoke_main"]
    aborted = Signature("crash", "execute", "Fatal Python error: Aborted")
    case = Case(CRASH, "execute", pipeline, aborted, guilty_op="torch.aten.sub.Tensor, torch.aten.view")
    found = upstream(case, SUB, tmp_path, run=True)
    assert found.step.entries == TORCH_BACKEND_TO_LINALG and found.run.fails is None
    assert issue_of(case, found).title == (
        "[torch-mlir] torch-backend-to-linalg-on-tensors-backend-pipeline: the compiled program "
        "(torch.aten.sub.Tensor and 1 more op) crashes when run (Aborted)"
    )


def test_a_wrong_result_gives_the_lowering_command_and_leaves_the_verdict_to_repro_py(tmp_path):
    pipeline = [
        BROKEN + "aten_sub_to_add",
        *TORCH_BACKEND_TO_LINALG,
        "python:compiler.replay_runtime.engine:boundary_as_bits",
    ]
    case = Case(MISMATCH, "compare", pipeline, Signature("compare", "values"), guilty_op="torch.aten.sub.Tensor")
    found = upstream(case, SUB, tmp_path, run=True)
    assert found.step.entries == TORCH_BACKEND_TO_LINALG and found.step.tool == "torch-mlir-opt"
    assert found.run.exit == 0 and found.run.fails is None  # not known: no tool fails on a miscompile
    expected = [np.full((2, 3), -1.0, np.float32)]
    issue = issue_of(case, found, expected, [np.full((2, 3), 3.0, np.float32)])
    assert issue.title == (
        "[torch-mlir] torch-backend-to-linalg-on-tensors-backend-pipeline: torch.aten.sub.Tensor lowered to wrong values"
    )
    assert issue.torch_gives.startswith("output 0: float32 [2, 3] [-1.")
    assert issue.compiled_gives.startswith("output 0: float32 [2, 3] [3.")


def test_a_pass_torch_mlir_opt_lacks_needs_mlir_opt_and_is_not_run_without_it(tmp_path, monkeypatch):
    monkeypatch.setitem(
        upstream_tools.TOOLS,
        "mlir-opt",
        upstream_tools.Tool("mlir-opt", lambda: None, upstream_tools.MLIR_OPT_SOURCE),
    )
    case = Case(ERROR, "lower", ["func.func(tosa-to-linalg)"], Signature("lower", "tosa-to-linalg", "x"))
    found = upstream(case, SUB, tmp_path, run=True)
    assert found.step.needs == "needs mlir-opt from an LLVM build at torch-mlir's LLVM commit"
    assert found.run.exit is None and found.run.fails is None and "LLVM commit" in found.run.output


@pytest.mark.parametrize(
    "entry, guilty, component",
    [
        ("func.func(convert-torch-to-tosa{  require-full-tosa-conversion=true})", None, TORCH_MLIR),
        ("torch-adjust-calling-conventions", None, TORCH_MLIR),
        ("func.func(tosa-to-linalg)", None, MLIR_UPSTREAM),
        ("one-shot-bufferize{copy-before-write}", None, MLIR_UPSTREAM),
        ("stablehlo-legalize-to-linalg", None, STABLEHLO),
        ("canonicalize", "torch.aten.view", TORCH_MLIR),  # a fold of a torch op
        ("canonicalize", "tosa.transpose", MLIR_UPSTREAM),
        ("python:compiler.executors.replay:iree_linalg", None, IREE),
    ],
)
def test_the_component_is_read_from_the_failing_pass_and_for_a_generic_pass_its_op(entry, guilty, component):
    assert component_of(entry, guilty) == component


def test_an_iree_step_is_iree_compile_with_the_configs_flags(tmp_path):
    pytest.importorskip("iree.compiler")
    text = "func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n  return %a : tensor<3xf32>\n}\n"
    case = Case(ERROR, "lower", ["python:compiler.executors.replay:iree_linalg"], Signature("lower", "x", "y"))
    step = step_of(case, text, tmp_path)
    assert step.tool == "iree-compile" and step.component == IREE
    assert step.command.startswith("iree-compile --iree-input-type=auto ") and UPSTREAM_IR in step.command
