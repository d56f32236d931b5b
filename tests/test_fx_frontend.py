"""The FX frontend on what real models carry: non-persistent buffers, and failures named after their tool."""

from __future__ import annotations

import pytest
import torch

from compiler.compiled_module import compile_module
from compiler.frontends import fx
from compiler.stages import StageError


class ScaledByNonPersistentBuffer(torch.nn.Module):
    """Like a rotary embedding's `inv_freq`: a buffer left out of the state dict."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0, -3.0]), persistent=False)

    def forward(self, x):
        return x * self.scale


def test_non_persistent_buffer_is_imported_with_its_value():
    module, x = ScaledByNonPersistentBuffer(), torch.rand(3, 2)
    assert "scale" not in module.state_dict()
    compiled = compile_module(module, (x,), backend="linalg")
    try:
        result = compiled(x)
    finally:
        compiled.close()
    torch.testing.assert_close(result, x * torch.tensor([2.0, -3.0]))


def test_a_failing_decomposition_is_not_blamed_on_torch_export(monkeypatch):
    def broken_tanh(x):
        raise RuntimeError("this decomposition is broken")

    monkeypatch.setattr(fx, "get_decomposition_table", lambda: {torch.ops.aten.tanh.default: broken_tanh})

    class Tanh(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x)

    with pytest.raises(StageError) as raised:
        fx.capture(Tanh(), [torch.rand(2)])
    assert raised.value.stage == "capture"
    assert raised.value.message.startswith("decompositions: RuntimeError: this decomposition is broken")
    assert "torch.export" not in raised.value.message
    # Where it was raised travels with it, for the xfail updater's own-code rule.
    assert 'test_fx_frontend.py", line' in "\n".join(raised.value.diagnostics)
    assert "in broken_tanh" in "\n".join(raised.value.diagnostics)


class MaskedRows(torch.nn.Module):
    """Like a text model's (input_ids, attention_mask): two inputs of one (batch, seq)."""

    def forward(self, x, mask):
        return x * mask.unsqueeze(-1)


def test_inputs_that_share_dynamic_dims_are_captured_with_one_symbol_per_dim():
    # Each annotated -1 is its own `Dim.AUTO`; torch.export links the ones the program
    # equates, so the compiled program is told that x's batch and seq are the mask's.
    # (The zoo's dynamic models fail on linalg for a torch-mlir reason, not unlinked dims.)
    program = fx.capture(MaskedRows(), [torch.rand(2, 5, 4), torch.ones(2, 5)], [[-1, -1, 4], [-1, -1]])
    x, mask = (node.meta["val"].shape for node in program.graph.nodes if node.op == "placeholder")
    assert all(isinstance(size, torch.SymInt) for size in mask)
    assert [str(size) for size in x[:2]] == [str(size) for size in mask]
    assert len(program.range_constraints) == 2
