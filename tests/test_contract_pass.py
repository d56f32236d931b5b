"""torch-mlir's backend contract pass, run one iteration at a time (`stages.run_pass`):
the same output, or the same failure, as the whole pass, and a fixed point ends it."""

from __future__ import annotations

import pytest
from torch_mlir import ir

from compiler import pipelines, stages
from compiler.stages import expand, format_diagnostics, module_text, new_context, parse_module

# An argument of unknown dtype: the first iteration gives tanh's result the argument's
# shape, and from then on the contract's check refuses the same module every time.
NEVER_MEETS = """
func.func @main(%a: !torch.vtensor<[2,3],unk>) -> !torch.vtensor {
  %0 = torch.aten.tanh %a : !torch.vtensor<[2,3],unk> -> !torch.vtensor
  return %0 : !torch.vtensor
}
"""

# Already as refined as it gets: the first iteration changes nothing, and the check refuses
# the argument's unknown dtype; a fixed point from the start.
NEVER_CHANGES = """
func.func @main(%a: !torch.vtensor<[2,3],unk>) -> !torch.vtensor<[2,3],unk> {
  return %a : !torch.vtensor<[2,3],unk>
}
"""

# An operator torch-mlir does not know: the simplification pipeline itself fails on it,
# in the first iteration.
PIPELINE_FAILS = """
func.func @main(%a: !torch.vtensor<[2],f32>) -> !torch.vtensor {
  %0 = torch.operator "foo.bar"(%a) : (!torch.vtensor<[2],f32>) -> !torch.vtensor
  return %0 : !torch.vtensor
}
"""

# tanh's result shape is refined from its operand in the first iteration.
MEETS_ONCE_REFINED = """
func.func @main(%a: !torch.vtensor<[2,3],f32>) -> !torch.vtensor {
  %0 = torch.aten.tanh %a : !torch.vtensor<[2,3],f32> -> !torch.vtensor
  return %0 : !torch.vtensor
}
"""


def _contract_entry(context) -> str:
    (entry,) = [
        p for p in expand(pipelines.JIT_TO_TORCH_BACKEND, context) if p.startswith("torch-lower-to-backend-contract")
    ]
    assert "max-iterations=10" in entry
    return entry


def _outcome(run, text: str, entry: str, context) -> tuple[list[str] | None, str]:
    module = parse_module(text, context)
    try:
        run(module, entry)
    except ir.MLIRError as error:
        return format_diagnostics(error), module_text(module)
    return None, module_text(module)


@pytest.mark.parametrize(
    ("text", "pipeline_runs"),
    [(NEVER_MEETS, 2), (NEVER_CHANGES, 1), (MEETS_ONCE_REFINED, 1), (PIPELINE_FAILS, 1)],
    ids=["never-meets", "never-changes", "meets-once-refined", "pipeline-fails"],
)
def test_the_contract_pass_by_iterations_ends_as_the_whole_pass(monkeypatch, text, pipeline_runs):
    context = new_context()
    entry = _contract_entry(context)
    whole = _outcome(lambda module, e: stages.run_pipeline(module, [e]), text, entry, context)

    runs = []
    real = stages.run_pipeline
    monkeypatch.setattr(
        stages, "run_pipeline", lambda module, pipeline: (runs.append(pipeline), real(module, pipeline))
    )
    by_iterations = _outcome(stages.run_pass, text, entry, context)

    assert by_iterations == whole
    assert len(runs) == pipeline_runs and all("max-iterations=1 " in p[0] or "max-iterations=1}" in p[0] for p in runs)
    if text in (NEVER_MEETS, NEVER_CHANGES):
        assert "unsupported by backend contract: tensor with unknown dtype" in whole[0][0]
    if text is PIPELINE_FAILS:
        assert "failed to legalize operation 'torch.operator'" in whole[0][0]
