import torch
import torch.export.exported_program as exported_program
from torch_mlir.extras.fx_decomp_util import get_decomposition_table

from compiler.frontends import decompose


class Mixed(torch.nn.Module):
    """Ops torch-mlir's table decomposes (linear, layer_norm, addmm) and a CIA op it keeps (rms_norm)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        h = torch.nn.functional.rms_norm(torch.nn.functional.layer_norm(self.linear(x), [3]), [3])
        return torch.softmax(torch.addmm(h, y, y.T), dim=-1).flatten()


def graph_text(program) -> str:
    return program.graph_module.code


def test_the_decomposed_graph_is_the_one_torch_builds_without_the_shortcuts():
    module, args = Mixed(), (torch.rand(3, 4), torch.rand(3, 3))
    decompose.uninstall()
    plain = torch.export.export(module, args).run_decompositions(get_decomposition_table())
    fast = decompose.run_decompositions(torch.export.export(module, args), get_decomposition_table())
    assert graph_text(fast) == graph_text(plain)
    assert "aten.rms_norm" in graph_text(fast)
    assert "aten.linear" not in graph_text(fast) and "aten.addmm" not in graph_text(fast)
    torch.testing.assert_close(fast.module()(*args), plain.module()(*args))


def test_the_op_cache_sees_ops_registered_after_it_filled():
    decompose.install()
    before = exported_program._collect_all_valid_cia_ops()
    library = torch.library.Library("e2e_decompose_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    after = exported_program._collect_all_valid_cia_ops()
    assert torch.ops.e2e_decompose_test.twice.default not in before
    assert torch.ops.e2e_decompose_test.twice.default in after
    assert exported_program._collect_all_valid_cia_ops() is after  # nothing new: the cached set


def test_torch_ops_callable_still_answers_isinstance():
    decompose.install()
    import torch._ops

    assert isinstance(len, torch._ops.Callable) and not isinstance(3, torch._ops.Callable)
    assert torch._ops.Callable[[int], int] is torch._ops.Callable
