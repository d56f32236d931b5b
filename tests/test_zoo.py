"""The model zoo: what it registers, and goldens computed the way programs are captured."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

from e2e.framework import GLOBAL_TEST_REGISTRY
from e2e.framework.trace import golden_trace
from tests.extras import requires_extra

ZOO_FILES = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "e2e" / "test_suite").glob("zoo_*.py"))


@pytest.fixture(scope="module")
def zoo():
    for stem in ZOO_FILES:
        try:
            importlib.import_module(f"e2e.test_suite.{stem}")
        except ImportError:  # transformers missing: its families are skipped
            pass
    from e2e.test_suite.zoo_common import ZOO

    return ZOO


def test_every_architecture_has_a_static_and_a_dynamic_test(zoo):
    assert len(zoo) >= 5  # torch's own: RNNs and transformers
    for model in zoo:
        static, dynamic = (GLOBAL_TEST_REGISTRY[f"Zoo{model.name}_{kind}"] for kind in ("Static", "Dynamic"))
        assert any(-1 in dims for dims in model.dynamic_dims if dims)
        assert len(set(model.dynamic_shapes)) == 2, "a dynamic test calls the model at two shapes"
        assert static.tolerance == dynamic.tolerance == model.tolerance


@requires_extra("models")
def test_the_models_extra_adds_the_hugging_face_architectures(zoo):
    assert len(zoo) >= 12


def test_dynamic_annotation_does_not_leak_into_the_static_test(zoo):
    from e2e.test_suite.zoo_transformer import TRANSFORMERS

    model = TRANSFORMERS[0]
    static = GLOBAL_TEST_REGISTRY[f"Zoo{model.name}_Static"]
    dynamic = GLOBAL_TEST_REGISTRY[f"Zoo{model.name}_Dynamic"]
    assert static.arg_shapes(static.module_factory()) is None
    assert dynamic.arg_shapes(dynamic.module_factory()) == [list(d) for d in model.dynamic_dims]


def test_padded_encoder_golden_is_what_a_capture_computes(zoo):
    # The golden runs under no_grad, where PyTorch's nested-tensor fast path zeroes the
    # padded rows; torch.export captures the ordinary path. The zoo's encoder turns the
    # nested tensor off, so both agree.
    test = GLOBAL_TEST_REGISTRY["ZooTransformerEncoder_Static"]
    module = test.module_factory()
    (item,) = golden_trace(test, module)
    with torch.enable_grad():
        captured_semantics = module(*item.inputs)
    torch.testing.assert_close(item.outputs, captured_semantics.detach())
    padded_rows = item.inputs[1][-1]
    assert padded_rows.any() and item.outputs[-1][padded_rows].abs().sum() > 0

    from e2e.test_suite.zoo_transformer import D_MODEL

    nested = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(D_MODEL, 4, 64, dropout=0.0, batch_first=True), 2, enable_nested_tensor=True
    ).eval()
    nested.load_state_dict(module.encoder.state_dict())
    with torch.no_grad():
        fast = nested(*item.inputs[:1], src_key_padding_mask=item.inputs[1])
    assert fast[-1][padded_rows].abs().sum() == 0  # why the zoo turns it off
