"""The `onnx` config, the ONNX backend suite's cases and the onnxruntime oracle."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx", reason='needs the onnx extra: pip install -e ".[onnx]"')
from onnx import TensorProto, helper  # noqa: E402

from compiler.frontends import onnx as onnx_frontend  # noqa: E402
from e2e.configs import load_config  # noqa: E402
from e2e.configs.onnx_oracle import oracle_notes  # noqa: E402
from e2e.framework import registry  # noqa: E402
from e2e.framework.isolation import Limits  # noqa: E402
from e2e.framework.prepared import prepare  # noqa: E402
from e2e.framework.result import FAIL, PASS, SKIP  # noqa: E402
from e2e.framework.runner import run_pair  # noqa: E402
from e2e.framework.trace import TraceItem  # noqa: E402
from e2e.onnx_backend import cases  # noqa: E402
from e2e.onnx_backend.register import OnnxModelModule  # noqa: E402


def one_node_model(op: str, inputs=("x",), domain: str = "", elem=TensorProto.FLOAT, **attributes) -> bytes:
    node = helper.make_node(op, list(inputs), ["y"], domain=domain or None, **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(name, elem, [2, 3]) for name in inputs],
        [helper.make_tensor_value_info("y", elem, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()  # onnxruntime reads <= 11


def run(test: registry.Test, tmp_path, config: str = "onnx"):
    return run_pair(prepare(test), load_config(config), reports_dir=tmp_path, limits=Limits(300, None), isolate=False)


def model_test(model: bytes, x: torch.Tensor, expected: torch.Tensor) -> registry.Test:
    return registry.Test(
        "onnx/case",
        lambda: OnnxModelModule(model, [expected]),
        lambda module, tu: module.forward(x),
        model_format="onnx",
    )


class Dynamic(torch.nn.Module):
    @registry.annotate_args([None, ([-1, 3], torch.float32, True)])
    def forward(self, x):
        return torch.tanh(x) * 2, x.sum(0)


def test_a_torch_module_is_exported_with_its_dynamic_dims_and_compared(tmp_path):
    def invoke(module, tu):
        module.forward(tu.rand(4, 3))
        module.forward(tu.rand(7, 3))  # one program takes both batch sizes

    result = run(registry.Test("OnnxDynamic", Dynamic, invoke), tmp_path)
    assert result.outcome == PASS, result.error
    assert any("torch.onnx.export (dynamo), ONNX opset" in note for note in result.notes)
    assert {"capture", "import", "torch-backend", "backend", "lower", "execute"} <= set(result.stage_seconds)


def test_the_reused_exporter_registry_exports_the_same_model(monkeypatch):
    from torch.onnx._internal.exporter import _registration

    from compiler.frontends import onnx as onnx_frontend

    onnx_frontend._reuse_torchlib_table()
    args = [torch.rand(3, 4)]
    cached = onnx_frontend.export(Dynamic(), args, [[-1, 3]])
    original = _registration.ONNXRegistry.from_torchlib.__func__._e2e_original
    monkeypatch.setattr(_registration.ONNXRegistry, "from_torchlib", classmethod(original))
    assert (
        torch.onnx.export(
            Dynamic(), tuple(args), dynamic_shapes=({0: torch.export.Dim.AUTO},), dynamo=True
        ).model_proto.SerializeToString()
        == cached
    )


def test_a_model_the_lowering_rejects_fails_in_its_pass_and_keeps_the_model(tmp_path):
    model = one_node_model("NoSuchOp", domain="my.domain")
    result = run(model_test(model, torch.ones(2, 3), torch.ones(2, 3)), tmp_path)
    assert (result.outcome, result.stage) == (FAIL, "torch-backend"), result.error
    assert "convert-torch-onnx-to-torch" in result.failing_pass
    assert (
        result.signature.format()
        == "torch-backend | convert-torch-onnx-to-torch | no conversion of onnx.NoSuchOp to the torch dialect"
    )
    assert (tmp_path / "ir" / "onnx/case" / "onnx" / "model.onnx").read_bytes() == model


def test_an_onnx_model_runs_as_given_and_the_oracle_places_a_wrong_expectation(tmp_path):
    x = torch.rand(2, 3)
    model = one_node_model("Exp")
    assert run(model_test(model, x, torch.exp(x)), tmp_path).outcome == PASS
    wrong = run(model_test(model, x, torch.exp(x) + 1), tmp_path)  # the "golden" is wrong, not the compiler
    assert (wrong.outcome, wrong.signature.format()) == (FAIL, "compare | values")
    assert any("agrees with the compiled result; the failure is in the model" in n for n in wrong.notes), wrong.notes


def test_oracle_blames_torch_mlir_when_onnxruntime_agrees_with_torch():
    x = torch.rand(2, 3)
    golden = [TraceItem("forward", [x], torch.exp(x))]
    compiled = [TraceItem("forward", [x], torch.exp(x) * 1.5)]
    spec = torch.utils._pytree.tree_flatten(torch.exp(x))[1]
    notes = oracle_notes(lambda item: (one_node_model("Exp"), spec), lambda item: [x], golden, compiled, None)
    assert "agrees with torch; disagrees with the compiled result" in notes[0]
    assert "the failure is in torch-mlir" in notes[0]


def test_without_the_onnx_packages_pairs_are_skipped_with_the_install_line(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_frontend, "missing_packages", lambda names=None: ["onnxscript"])
    result = run(registry.Test("OnnxDynamic", Dynamic, lambda m, tu: m.forward(tu.rand(4, 3))), tmp_path)
    assert result.outcome == SKIP
    assert 'pip install -e ".[onnx]"' in result.error and "onnxscript" in result.error


def test_backend_cases_that_cannot_be_tensors_are_skipped_with_their_reason():
    def model_with(value_info, node=None):
        node = node or helper.make_node("Identity", ["x"], ["y"])
        graph = helper.make_graph(
            [node], "g", [value_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
        )
        return helper.make_model(graph)

    sequence = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])
    assert cases.make_case("node/seq", "node", model_with(sequence), [[]], [np.ones(2)]).skip_reason == cases.NON_TENSOR
    tensor = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    adam = helper.make_node("Adam", ["x"], ["y"], domain=cases.TRAINING_DOMAIN)
    assert (
        cases.make_case("node/adam", "node", model_with(tensor, adam), [np.ones(2)], [np.ones(2)]).skip_reason
        == cases.TRAINING
    )
    strings = np.array(["a", "b"], dtype=object)
    assert cases.make_case("node/str", "node", model_with(tensor), [strings], [strings]).skip_reason == cases.STRING
    taken = cases.make_case("node/ok", "node", model_with(tensor), [np.ones(2, np.float16)], [np.ones(2, np.float32)])
    assert taken.skip_reason is None and taken.inputs[0].dtype == torch.float16 and taken.model
    scalar = cases.make_case("node/0d", "node", model_with(tensor), [np.float32(2.0)], [np.array(1.0, np.float32)])
    assert scalar.inputs[0].shape == () and scalar.outputs[0].shape == ()  # 0-d stays 0-d


def test_the_installed_onnx_gives_every_node_case_a_name_and_a_result_or_a_reason():
    node = cases.node_cases()
    assert len(node) >= 1800 and len({case.name for case in node}) == len(node)
    assert all(case.name.startswith("node/test_") for case in node)
    assert all(bool(case.model) != bool(case.skip_reason) for case in node)


SUITE = """
import numpy as np, torch
from onnx import TensorProto, helper
from e2e.framework import op_test
from e2e.onnx_backend.cases import OnnxCase, STRING
from e2e.onnx_backend.register import register_cases

op_test("Tanh", torch.tanh, lambda tu: [tu.rand(2, 3)])
node = helper.make_node("Neg", ["x"], ["y"])
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10).SerializeToString()
x = torch.tensor([1.0, -2.0])
register_cases([OnnxCase("node/test_neg", "node", model, [x], [-x]), OnnxCase("node/test_str", "node", skip_reason=STRING)], __file__)
"""


def test_onnx_cases_run_on_onnx_configs_only_and_an_opt_in_config_is_selected_by_node_id(pytester, monkeypatch):
    # The subprocess imports this checkout's plugin, not whichever one is installed.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    pytester.mkdir("suite").joinpath("cases.py").write_text(SUITE)
    common = ("-p", "e2e.plugin", "-p", "no:cacheprovider", "--no-reduce", "--e2e-suite", "suite", "-rs")
    result = pytester.runpytest_subprocess(*common, "--config", "linalg,onnx", timeout=600)
    result.assert_outcomes(passed=3, skipped=1)  # Tanh on both; node/test_neg on onnx; test_str skipped
    result.stdout.fnmatch_lines(["*ONNX case not expressible: string tensors*"])
    rows = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert sorted((r["test"], r["config"]) for r in rows) == [
        ("Tanh", "linalg"),
        ("Tanh", "onnx"),
        ("node/test_neg", "onnx"),
    ]
    again = pytester.runpytest_subprocess(*common, "suite/cases.py::Tanh::onnx", timeout=600)
    again.assert_outcomes(passed=1)  # no --config: the node id names the opt-in config


class Cummax(torch.nn.Module):
    @registry.annotate_args([None, ([-1, 4], torch.float32, True)])
    def forward(self, x):
        return torch.tanh(torch.cummax(x * 2, 0)[0]) + 1


def test_an_exporter_failure_names_the_op_and_reduces_to_a_torch_script(tmp_path):
    from e2e.reducer.strategies import reduce_result

    prepared = prepare(registry.Test("OnnxCummax", Cummax, lambda m, tu: m.forward(tu.rand(3, 4))))
    config = load_config("onnx")
    result = run_pair(prepared, config, reports_dir=tmp_path, limits=Limits(300, None), isolate=False)
    assert result.stage == "capture"
    assert result.signature.format().startswith(
        "capture | - | torch.onnx.export: ConversionError: torch.ops.aten.cummax.default"
    )
    outcome = reduce_result(result, prepared, config, tmp_path, time_box=60)
    assert outcome.bundle is not None and outcome.verified, outcome.note
    assert outcome.guilty_op == "aten.cummax.default" and outcome.ops_after == 1
    assert "torch.onnx.export" in (outcome.bundle / "repro.py").read_text()
