"""The RefBackend's opt-level policy: O0 for small programs, O2 for a million elements."""

import torch

from compiler.fx_compile import compile_module, fx_to_torch_backend_ir
from compiler.refbackend import LARGE_TENSOR_ELEMENTS, largest_tensor_elements, opt_level_for


def test_largest_tensor_counts_static_shapes_only():
    text = "!torch.vtensor<[3,4],f32> !torch.vtensor<[],f32> !torch.vtensor<[-1,500],f32> tensor<10x20xf32> tensor<?x9xf32>"
    assert largest_tensor_elements(text) == 200


class Sample(torch.nn.Module):
    def __init__(self, samples: int):
        super().__init__()
        self.samples = samples

    def forward(self, x):
        return torch.zeros(self.samples).add(x).sum()


def test_a_million_element_program_is_jitted_at_o2():
    x = torch.tensor(1.0)
    small, _ = fx_to_torch_backend_ir(Sample(1000), [x])
    large, _ = fx_to_torch_backend_ir(Sample(LARGE_TENSOR_ELEMENTS), [x])
    assert (opt_level_for(small), opt_level_for(large)) == (0, 2)
    assert compile_module(Sample(LARGE_TENSOR_ELEMENTS), [x])(x).item() == LARGE_TENSOR_ELEMENTS
