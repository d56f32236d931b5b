"""Wrong results of the onnx config reduced over the ONNX model's nodes (e2e.reducer.onnx_graph)."""

import subprocess
import sys

import pytest
import torch

onnx = pytest.importorskip("onnx", reason='needs the onnx extra: pip install -e ".[onnx]"')
from onnx import TensorProto, helper  # noqa: E402

from compiler.refbackend import LOWER_PIPELINE  # noqa: E402
from e2e.configs import load_config  # noqa: E402
from e2e.reducer.localize import stage_pipelines  # noqa: E402
from e2e.reducer.onnx_graph import reduce_onnx_mismatch  # noqa: E402
from e2e.reducer.reduce import op_count  # noqa: E402

BROKEN = "python:tests.broken_compilers:"
WEIGHT = torch.linspace(-1, 1, 12).reshape(3, 4)
CHAIN = [  # Mixed of tests/test_reducer.py, by hand, with a weight: relu(tanh(exp(x) + y) * w - x) + (exp(x) + y)
    ("Exp", ["x"], "e"),
    ("Add", ["e", "y"], "a"),
    ("Tanh", ["a"], "t"),
    ("Mul", ["t", "w"], "b"),
    ("Sub", ["b", "x"], "d"),
    ("Relu", ["d"], "r"),
    ("Add", ["r", "a"], "out"),
]


def chain_model(chain=CHAIN) -> bytes:
    nodes = [helper.make_node(op, inputs, [output]) for op, inputs, output in chain]
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [3, 4])  # noqa: E731
    weight = onnx.numpy_helper.from_array(WEIGHT.numpy(), "w")
    graph = helper.make_graph(nodes, "g", [value("x"), value("y")], [value(chain[-1][2])], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10).SerializeToString()


def mixed(x, y):
    a = torch.exp(x) + y
    return torch.relu(torch.tanh(a) * WEIGHT - x) + a


def backend_chain(broken: str | None = None) -> list[str]:
    chain = stage_pipelines(load_config("onnx"))["backend"]
    if broken is None:
        return chain
    return [*chain[: -len(LOWER_PIPELINE)], BROKEN + broken, *LOWER_PIPELINE]


def test_onnx_miscompile_found_node_by_node(tmp_path):
    x, y = torch.rand(3, 4), torch.rand(3, 4)
    outcome = reduce_onnx_mismatch(
        chain_model(), [x, y], [mixed(x, y)], backend_chain("mulf_to_addf"),
        test="T", config="onnx", reports_dir=tmp_path, time_box=60,
    )  # fmt: skip
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "onnx.Mul"
    reduced = onnx.load(str(outcome.bundle / "model.onnx"))
    assert [n.op_type for n in reduced.graph.node] == ["Mul"]
    repro = (outcome.bundle / "repro.mlir").read_text().split("{-#")[0]
    assert 'torch.operator "onnx.Mul"' in repro and "onnx.Tanh" not in repro  # raw torch-onnx IR, the node alone
    assert "dense_resource<w>" in repro  # the initializer it uses, kept as a resource (and replayed with it)
    assert op_count(repro) <= 4
    readme = (outcome.bundle / "README.md").read_text()
    assert "model.onnx" in readme and "onnx.reference.ReferenceEvaluator" in readme
    assert "torch-onnx-to-torch-backend-pipeline" in readme  # the bundle replays the onnx torch-backend stage
    done = subprocess.run([sys.executable, "-I", "repro.py"], cwd=outcome.bundle, capture_output=True, text=True)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
    # The config's own pipeline computes what the reference evaluator does: nothing to reduce.
    fine = reduce_onnx_mismatch(
        chain_model(), [x, y], [mixed(x, y)], backend_chain(),
        test="T2", config="onnx", reports_dir=tmp_path, time_box=60,
    )  # fmt: skip
    assert fine.bundle is None and "agrees with onnx.reference.ReferenceEvaluator" in fine.note


def test_a_model_that_disagrees_with_torch_is_not_reduced(tmp_path):
    """The model computes Add where torch multiplied: the model is wrong, not the compiler."""
    x, y = torch.rand(3, 4), torch.rand(3, 4)
    outcome = reduce_onnx_mismatch(
        chain_model([("Add", ["x", "y"], "out")]), [x, y], [x * y], backend_chain("mulf_to_addf"),
        test="T", config="onnx", reports_dir=tmp_path, time_box=60,
    )  # fmt: skip
    assert outcome.bundle is None and outcome.queries == 0
    assert "disagrees with torch" in outcome.note and "the failure is in the model" in outcome.note
    # A model that draws random values is not compared at all.
    noisy = reduce_onnx_mismatch(
        chain_model([("RandomUniformLike", ["x"], "u"), ("Add", ["u", "y"], "out")]), [x, y], [x + y],
        backend_chain(), test="T", config="onnx", reports_dir=tmp_path, time_box=60,
    )  # fmt: skip
    assert noisy.bundle is None and "draws random values (RandomUniformLike)" in noisy.note


class KeepNumbers(torch.nn.Module):
    def forward(self, x):
        return torch.where(x == x, x * 2, torch.zeros_like(x)) + 1


def test_a_suite_mismatch_on_the_onnx_config_gets_its_bundle(tmp_path):
    """reduce_result takes the onnx config's compare failures to the ONNX node search:
    torch-mlir's `onnx.Equal` holds NaN == NaN (as `NanInf_Nanmean` shows in the suite)."""
    from e2e.framework.isolation import Limits
    from e2e.framework.prepared import prepare
    from e2e.framework.registry import Test
    from e2e.framework.runner import run_pair
    from e2e.reducer.strategies import reduce_result

    def invoke(module, tu):
        x = tu.rand(3, 4)
        x[1, 2] = float("nan")
        module.forward(x)

    prepared = prepare(Test("KeepNumbers", KeepNumbers, invoke))
    config = load_config("onnx")
    result = run_pair(prepared, config, reports_dir=tmp_path, limits=Limits(120, None))
    assert result.stage == "compare", result.signature
    outcome = reduce_result(result, prepared, config, tmp_path, time_box=60)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "onnx.Equal"
    assert [n.op_type for n in onnx.load(str(outcome.bundle / "model.onnx")).graph.node] == ["Equal"]
