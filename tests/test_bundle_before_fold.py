"""A wrong result the IR already declares gets a bundle from before the step that declared it."""

from types import SimpleNamespace

import torch

from compiler.replay_runtime.mlir import module_text, new_context, parse_module
from compiler.replay_runtime.pipeline import run_entries
from compiler.stages import snapshot_path
from e2e.configs import load_config
from e2e.framework.signature import Signature
from e2e.framework.trace import TraceItem
from e2e.reducer.case import Case, observe
from tests.test_reducer import run_elsewhere

# As the TorchScript frontend imports `exp2(where(a <= b, x, x)), a + b` (x: [6,1] f16, a and b:
# [6,2]): torch-mlir 20261001 folds `where(c, x, x)` to `x` without broadcasting it to c's
# shape, so the backend gets a program that returns [6,1] where torch returns [6,2].
IMPORTED = """
func.func @main(%arg0: !torch.tensor {torch.type_bound = !torch.vtensor<[6,2],f32>}, %arg1: !torch.tensor {torch.type_bound = !torch.vtensor<[6,2],f32>}, %arg2: !torch.tensor {torch.type_bound = !torch.vtensor<[6,1],f16>}) -> (!torch.tensor, !torch.tensor) {
  %int1 = torch.constant.int 1
  %0 = torch.aten.le.Tensor %arg0, %arg1 : !torch.tensor, !torch.tensor -> !torch.tensor
  %1 = torch.aten.where.self %0, %arg2, %arg2 : !torch.tensor, !torch.tensor, !torch.tensor -> !torch.tensor
  %2 = torch.aten.exp2 %1 : !torch.tensor -> !torch.tensor
  %3 = torch.aten.add.Tensor %arg0, %arg1, %int1 : !torch.tensor, !torch.tensor, !torch.int -> !torch.tensor
  %4 = torch.prim.TupleConstruct %2, %3 : !torch.tensor, !torch.tensor -> !torch.tuple<tensor, tensor>
  return %2, %3 : !torch.tensor, !torch.tensor
}
"""


def _failing_pair(tmp_path):
    """The torchscript pair as the suite leaves it: its stages' inputs saved, torch's outputs."""
    config = load_config("torchscript")
    ir_dir = tmp_path / "ir" / "T" / config.name
    ir_dir.mkdir(parents=True)
    snapshot_path(ir_dir, "torch-backend").write_text(IMPORTED)
    module = parse_module(IMPORTED, new_context())
    run_entries(module, config.toolchain().to_torch_backend)
    snapshot_path(ir_dir, "backend").write_text(module_text(module))
    a, b, x = torch.randn(6, 2), torch.randn(6, 2), torch.randn(6, 1).half()
    outputs = (torch.exp2(torch.where(a <= b, x, x)), a + b)
    prepared = SimpleNamespace(golden=[TraceItem("forward", [a, b, x], outputs)])
    result = SimpleNamespace(
        test="T", outcome="fail", stage="compare", failing_call=0, signature=Signature("compare", "shape")
    )
    return result, prepared, config


def test_a_fold_that_changes_a_shape_is_bundled_from_before_the_fold(tmp_path):
    from e2e.reducer.strategies import reduce_result

    result, prepared, config = _failing_pair(tmp_path)
    assert "[6,1],f16" in snapshot_path(tmp_path / "ir" / "T" / config.name, "backend").read_text()  # the fold
    outcome = reduce_result(result, prepared, config, tmp_path, time_box=60, check_types=False)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    repro = (outcome.bundle / "repro.mlir").read_text()
    # The bundle holds the op the step folds, not the folded `return %arg2`, and checks the IR's
    # own declared result against torch's; its pipeline is the step, then that check.
    assert "torch.aten.where.self" in repro and "results_as_torch" in repro, repro
    assert outcome.guilty_op == "torch.aten.where.self", outcome.guilty_op
    assert "torch.aten.add.Tensor" not in repro  # the result the bug does not need is dropped
    assert run_elsewhere(outcome.bundle, tmp_path).returncode == 1
    # Without the step that folds, the check passes: the bundle exits 0 once the fold is fixed.
    case = Case.from_json((outcome.bundle / "case.json").read_text())
    without_fold = Case(case.kind, case.stage, [case.pipeline[0], case.pipeline[-1]], case.signature)
    assert observe(without_fold, repro.split("{-#")[0]) is None
