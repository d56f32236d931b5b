"""`ltc` and `torchscript` honour dynamic dims or say they cannot: never a static pass."""

from __future__ import annotations

import pytest
import torch

from compiler.stages import Snapshots
from e2e.configs import load_config
from e2e.framework import TestUtils, annotate_args
from e2e.framework.compare import compare_traces
from e2e.framework.prepared import prepare
from e2e.framework.registry import Test
from e2e.framework.result import NotApplicable


class Scripted(torch.nn.Module):
    @annotate_args([None, ([-1, 4], torch.float32, True)])
    def forward(self, x):
        return torch.tanh(x) * 2.0


class TracedOnly(torch.nn.Module):
    """`**kwargs` cannot be scripted: torchscript falls back to tracing."""

    @annotate_args([None, ([-1, 4], torch.float32, True)])
    def forward(self, x, **kwargs):
        return torch.tanh(x) * 2.0


def two_shapes(module, tu: TestUtils) -> None:
    module.forward(tu.rand(2, 4))
    module.forward(tu.rand(3, 4))


def prepared_test(module_class, shape_mode: str):
    prepared = prepare(Test(f"{module_class.__name__}_TwoShapes", module_class, two_shapes))
    prepared.shape_mode = shape_mode
    return prepared


def compile_and_run(config_name: str, prepared):
    config = load_config(config_name)
    compiled = config.compile(prepared, Snapshots())
    return compiled, config.run(compiled, prepared.golden)


@pytest.mark.parametrize("config_name, module_class", [("ltc", Scripted), ("torchscript", TracedOnly)])
def test_static_capture_of_a_dynamic_test_is_not_applicable(config_name, module_class):
    with pytest.raises(NotApplicable, match="traces static shapes.*run with --shapes static"):
        compile_and_run(config_name, prepared_test(module_class, "annotated"))


@pytest.mark.parametrize("config_name, module_class", [("ltc", Scripted), ("torchscript", TracedOnly)])
def test_static_mode_compiles_each_call_shape_and_says_so(config_name, module_class):
    prepared = prepared_test(module_class, "static")
    compiled, trace = compile_and_run(config_name, prepared)
    assert compare_traces(prepared.golden, trace) is None
    static_notes = [note for note in compiled.notes if note.startswith("compiled static shapes")]
    assert static_notes == [
        "compiled static shapes: forward(float32[2, 4])",
        "compiled static shapes: forward(float32[3, 4])",
    ]


def test_scripted_dynamic_dims_take_every_call_with_one_program():
    prepared = prepared_test(Scripted, "annotated")
    compiled, trace = compile_and_run("torchscript", prepared)
    assert compare_traces(prepared.golden, trace) is None
    assert len(compiled.programs) == 1
    assert not any(note.startswith("compiled static shapes") for note in compiled.notes)


class MadeOnTheHost(torch.nn.Module):
    """A factory given `device="cpu"` (as OpInfo's samples give it): LTC never sees it."""

    @annotate_args([None, ([3], torch.float32, True)])
    def forward(self, x):
        return torch.full((2, 3), 1.5, device="cpu")


def test_ltc_on_a_test_that_makes_its_output_on_the_host_is_not_applicable():
    prepared = prepare(Test("MadeOnTheHost_Full", MadeOnTheHost, lambda module, tu: module.forward(tu.rand(3))))
    with pytest.raises(NotApplicable, match="output leaf 0 is made on cpu by the method itself"):
        compile_and_run("ltc", prepared)
