"""The fuzzing campaign: its oracle, its grouping of failures into bugs, and a tiny real campaign."""

from __future__ import annotations

import torch

from e2e.framework.compare import compare_traces
from e2e.framework.judge import Outcome
from e2e.framework.registry import Test
from e2e.framework.runner import prepare
from e2e.framework.trace import TraceItem
from e2e.generate.oracle import Float64Oracle, SpecRefusal


class Cancel(torch.nn.Module):
    """(a + b) - a: float32 rounds b away next to 1e8 (spacing 8); float64 keeps it."""

    def forward(self, a, b):
        return (a + b) - a


def cancel_test() -> Test:
    return Test(
        "Fuzz_Cancel",
        Cancel,
        lambda module, tu: module.forward(torch.full((2,), 1e8), torch.full((2,), 1.5)),
    )


def judged(compiled: float):
    """The oracle's explanation of a made-up compiled answer `compiled` to the Cancel program."""
    prepared = prepare(cancel_test())
    golden = prepared.golden[0]
    trace = [TraceItem(golden.method, golden.inputs, torch.full((2,), compiled))]
    mismatch = compare_traces(prepared.golden, trace)
    assert mismatch is not None and mismatch.kind == "values"  # torch's float32 says 0
    return Float64Oracle().explain(prepared, Outcome("compare", mismatch=mismatch, trace=trace))


def test_f64_oracle_acquits_a_result_closer_to_float64_than_torch():
    explanation = judged(1.5)  # the exact answer; torch's float32 gives 0
    assert explanation.acquit
    assert "float64 distance acquits" in explanation.notes[0]


def test_f64_oracle_keeps_a_result_further_from_float64_than_torch():
    explanation = judged(5.0)  # 3.5 from float64; torch is 1.5 from it
    assert not explanation.acquit and explanation.stage is None
    assert "float64 distance failed" in explanation.notes[0]


def test_spec_refusal_blames_the_lowering_of_a_defined_program():
    prepared = prepare(cancel_test())
    refused = RuntimeError("tosa_reference_model failed (exit 1): OpPow: x is less than 0")
    explanation = SpecRefusal().explain(prepared, Outcome("execute", error=refused))
    assert explanation.stage == "backend" and "convert-torch-to-tosa" in explanation.error
    assert SpecRefusal().explain(prepared, Outcome("execute", error=RuntimeError("out of memory"))) is None
