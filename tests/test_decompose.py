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


def _kernels_and_fake_rules(ops) -> dict:
    from torch._subclasses import fake_impls

    return {op: (dict(op.py_kernels), fake_impls.op_implementations_dict.get(op)) for op in ops}


def test_a_replayed_override_builds_the_same_graphs_and_leaves_every_op_as_torch_does():
    module, args = Mixed(), (torch.rand(3, 4), torch.rand(3, 3))
    table = get_decomposition_table()
    decompose.uninstall()
    ops = exported_program._collect_all_valid_cia_ops()
    plain = [graph_text(torch.export.export(module, args).run_decompositions(table)) for _ in range(3)]
    plain_state = _kernels_and_fake_rules(ops)
    decompose.install()
    override = exported_program._override_composite_implicit_decomp
    fast = []
    for _ in range(3):
        replays = override.replays
        fast.append(graph_text(decompose.run_decompositions(torch.export.export(module, args), table)))
    assert override.replays == replays + 1  # the last call was a replay
    assert fast == plain
    assert _kernels_and_fake_rules(ops) == plain_state


def test_a_replay_is_not_used_when_an_op_changed_since_the_recording():
    module, args = Mixed(), (torch.rand(3, 4), torch.rand(3, 3))
    table = get_decomposition_table()
    decompose.install()
    for _ in range(2):
        decompose.run_decompositions(torch.export.export(module, args), table)
    override = exported_program._override_composite_implicit_decomp
    replays = override.replays
    rms_norm = torch.ops.aten.rms_norm.default
    rms_norm.py_impl(torch._C.DispatchKey.AutocastCPU)(lambda *a, **k: None)
    try:
        graph = graph_text(decompose.run_decompositions(torch.export.export(module, args), table))
    finally:
        del rms_norm.py_kernels[torch._C.DispatchKey.AutocastCPU]
        rms_norm._dispatch_cache.clear()
    assert override.replays == replays and "aten.rms_norm" in graph


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


def test_the_table_split_is_torchs_own_and_sees_ops_registered_after_it():
    decompose.install()
    table = get_decomposition_table()
    split, torchs = exported_program._split_decomp_table_to_cia_and_python_decomp, decompose._ORIGINAL["split"]
    first, second = split(dict(table)), split(dict(table))
    assert first == torchs(dict(table)) and second == first
    assert first[0] is not second[0] and first[1] is not second[1]  # a caller may change its own
    library = torch.library.Library("e2e_decompose_split_test", "DEF")
    library.define("thrice(Tensor x) -> Tensor")
    library.impl("thrice", lambda x: x * 3, "CompositeImplicitAutograd")
    after = split(dict(table))
    assert torch.ops.e2e_decompose_split_test.thrice.default in after[0]  # kept whole, as torch keeps it
    assert after == torchs(dict(table))
    odd = {torch.ops.aten.linear.default: [], torch.ops.aten.addmm.default: table[torch.ops.aten.addmm.default]}
    assert split(dict(odd)) == torchs(dict(odd))  # an unhashable entry: the key is compared, not hashed
