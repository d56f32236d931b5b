"""The dynamo frontend (torch.compile -> FX importer) through the frontend seam: a graph
break is a capture failure that names it; parameters and in-place updates of inputs."""

from __future__ import annotations

import pytest
import torch

from compiler.backend_compile import compile_backend_ir
from compiler.stages import Snapshots, StageError
from compiler.toolchain import toolchain


class PrintsMidway(torch.nn.Module):
    def forward(self, x):
        print("midway")  # dynamo cannot trace it: a graph break
        return x + 1


class LinearUpdatingItsInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x, counter):
        counter.add_(1)
        return torch.relu(self.linear(x))


def compile_call(module, inputs):
    chain = toolchain("dynamo", "linalg")
    snapshots = Snapshots()
    imported = chain.frontend.capture(module, inputs, None, "forward", snapshots)
    torch_ir = chain.frontend.torch_backend_ir(imported, chain.to_torch_backend, snapshots)
    return imported, compile_backend_ir(torch_ir, chain, snapshots=snapshots)


def test_a_graph_break_fails_capture_and_names_its_reason():
    with pytest.raises(StageError) as raised:
        compile_call(PrintsMidway(), [torch.rand(2)])
    assert raised.value.stage == "capture"
    assert raised.value.message.startswith("graph break") and "print" in raised.value.message


def test_parameters_travel_as_constants_and_an_updated_input_is_left_alone():
    torch.manual_seed(0)
    module, x, counter = LinearUpdatingItsInput(), torch.rand(4, 3), torch.zeros(2)
    imported, program = compile_call(module, [x, counter])
    try:
        (result,) = program(*imported.arguments([x, counter]))
    finally:
        program.close()
    torch.testing.assert_close(result, torch.relu(module.linear(x)))
    assert torch.equal(counter, torch.zeros(2))  # the capture ran on copies
    assert any("updated in place" in note for note in imported.result_notes)
