"""The JIT IR importer and the `ltc` / `torchscript` frontends, through their public APIs."""

from __future__ import annotations

from typing import List, Optional, Tuple

import pytest
import torch

from compiler import pipelines
from compiler.backend_compile import compile_torch_backend_ir
from compiler.compiled_module import compile_jit_module
from compiler.frontends import load_frontend, torchscript
from compiler.frontends.jit import ConstantInput, TensorArg, import_graph
from compiler.frontends.jit_frontend import jit_to_torch_backend_ir, run_torch_backend
from compiler.replay_runtime.signature import normalize, stage_signature
from compiler.stages import StageError, module_text, parse_module, run_stage


def _compile_graph(graph: torch._C.Graph, inputs) -> tuple[str, object]:
    imported = import_graph(graph, inputs)
    raw = module_text(imported.module)
    run_stage(imported.module, "torch-backend", pipelines.JIT_TO_TORCH_BACKEND)
    return raw, compile_torch_backend_ir(module_text(imported.module), "linalg")


# --- control flow ------------------------------------------------------------------


def _repeat_double(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x
    for _ in range(n):
        y = y * 2.0
    if n > 2:
        y = y - 1.0
    return y


def _count_halvings(x: torch.Tensor, n: int) -> torch.Tensor:
    steps = 0
    while n > 1:
        n = n // 2
        steps += 1
    return x + steps


def _branch_on_data(x: torch.Tensor) -> torch.Tensor:
    # The branches yield scalars: value semantics are not inferred across regions.
    if bool(x.sum() > 0):
        k = 3.0
    else:
        k = -1.0
    return x * k


def test_counted_loop_and_if_on_constants_execute():
    graph = torch.jit.script(_repeat_double).graph
    raw, program = _compile_graph(graph, [TensorArg((2, 3), torch.float32), ConstantInput(3)])
    x = torch.randn(2, 3)
    # A counted loop over tensors is unrolled (shape inference cannot see through it).
    assert raw.count("torch.aten.mul.Scalar") == 3
    torch.testing.assert_close(program(x)[0], _repeat_double(x, 3))


def test_while_loop_becomes_prim_loop():
    # Import only: lowering a while-style `torch.prim.Loop` does not terminate (known gap).
    graph = torch.jit.script(_count_halvings).graph
    raw = module_text(import_graph(graph, [TensorArg((4,), torch.float32), ConstantInput(20)]).module)
    assert "torch.prim.Loop" in raw and "torch.prim.Loop.condition" in raw
    assert "torch.aten.floordiv.int" in raw


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_on_tensor_data_becomes_prim_if_and_executes(sign):
    graph = torch.jit.script(_branch_on_data).graph
    raw, program = _compile_graph(graph, [TensorArg((3,), torch.float32)])
    assert "torch.prim.If" in raw
    x = torch.rand(3) * sign
    torch.testing.assert_close(program(x)[0], _branch_on_data(x))


# --- lists, tuples, attributes, unknown ops ------------------------------------------


class ListsAndTuples(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        a, b = torch.chunk(x, 2, dim=0)  # prim::ListUnpack
        pair = (a + y, b * y)  # prim::TupleConstruct / TupleUnpack
        first, second = pair
        return torch.cat([first, second], 1), [first.sum(0), second]


def test_lists_and_tuples_torchscript():
    module, x, y = ListsAndTuples(), torch.randn(4, 3), torch.randn(2, 3)
    compiled = compile_jit_module(module, (x, y), "torchscript")
    assert compiled.lowered.notes["capture"] == "script"
    got, expected = compiled(x, y), module(x, y)
    assert isinstance(got, tuple) and isinstance(got[1], list) and len(got[1]) == 2
    torch.testing.assert_close(got, expected)


class WithState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(5, 3)
        self.register_buffer("offset", torch.arange(3, dtype=torch.float32))
        self.scale = 2

    def forward(self, x):
        return self.linear(x) * self.scale + self.offset


@pytest.mark.parametrize("frontend", ["torchscript", "ltc"])
def test_parameters_and_buffers_become_unelided_constants(frontend):
    torch.manual_seed(0)
    module, x = WithState(), torch.randn(2, 5)
    lowered = jit_to_torch_backend_ir(module, (x,), load_frontend(frontend))
    # Only the user input is an argument; the weights are literals with their data.
    assert lowered.argument_indices == [0]
    assert "dense_resource<" in lowered.torch_backend_ir
    assert "..." not in lowered.torch_backend_ir
    assert "func.func @main(%arg0: !torch.vtensor<[2,5],f32>) -> !torch.vtensor<[2,3],f32>" in lowered.torch_backend_ir
    program = compile_torch_backend_ir(lowered.torch_backend_ir, "linalg")
    torch.testing.assert_close(program(*lowered.arguments((x,)))[0], module(x))


def test_op_unknown_to_the_torch_dialect_becomes_torch_operator():
    graph = torch._C.parse_ir(
        """graph(%x : Tensor):
  %y : Tensor = aten::frobnicate(%x)
  %z : Tensor = aten::tanh(%y)
  return (%z)"""
    )
    imported = import_graph(graph, [TensorArg((3,), torch.float32)])
    assert imported.unknown_ops == ["aten.frobnicate"]
    raw = module_text(imported.module)
    assert 'torch.operator "aten.frobnicate"' in raw and "torch.aten.tanh" in raw


class Hypot(torch.nn.Module):
    def forward(self, a, b):
        return torch.hypot(a, b)


def test_unknown_op_fails_in_lowering_naming_the_op():
    a, b = torch.rand(3), torch.rand(3)
    with pytest.raises(StageError) as caught:
        jit_to_torch_backend_ir(Hypot(), (a, b), load_frontend("torchscript"))
    assert caught.value.stage == "torch-backend"
    assert "aten.hypot" in str(caught.value)


def test_unsupported_graph_input_is_an_import_error():
    graph = torch.jit.script(_repeat_double).graph
    with pytest.raises(StageError) as caught:
        import_graph(graph, [TensorArg((2,), torch.float32)])
    assert caught.value.stage == "import" and "2 inputs" in caught.value.message


# --- end to end -------------------------------------------------------------------------


class SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(6, 8)
        self.out = torch.nn.Linear(8, 2)

    def forward(self, x):
        return torch.softmax(self.out(torch.relu(self.hidden(x))), dim=-1)


def _imported_torchscript(module: torch.nn.Module, example_inputs) -> object:
    captured = torchscript.capture(module, example_inputs, None, "forward")
    return import_graph(captured.graph, captured.graph_inputs)


@pytest.mark.parametrize("module", [SmallMLP(), Hypot()], ids=["lowers", "fails"])
def test_torch_backend_pass_by_pass_is_the_whole_pipeline_localized(module):
    """`run_torch_backend` runs its passes one at a time so that a failing pass runs once:
    its IR must be the whole pipeline's, and its error the one localization finds (the
    pass, the IR before it; the diagnostics up to their locations)."""
    torch.manual_seed(0)
    inputs = (torch.randn(3, 6),) if isinstance(module, SmallMLP) else (torch.rand(3), torch.rand(3))
    outcomes = []
    for run in (
        lambda m: run_stage(m, "torch-backend", load_frontend("torchscript").to_torch_backend("linalg")),
        lambda m: run_torch_backend(m, load_frontend("torchscript")),
    ):
        try:
            outcomes.append(module_text(run(_imported_torchscript(module, inputs).module)))
        except StageError as error:
            located = [normalize(line) for line in error.diagnostics]
            outcomes.append(
                (
                    error.failing_pass,
                    error.input_ir,
                    located,
                    stage_signature("torch-backend", error.message, error.failing_pass),
                )
            )
    whole, pass_by_pass = outcomes
    assert pass_by_pass == whole
    if isinstance(module, SmallMLP):
        assert "-> !torch.vtensor<[3,2],f32>" in whole and "!torch.tensor" not in whole
    else:
        assert whole[0].startswith("torch-lower-to-backend-contract") and "aten.hypot" in whole[1]
        assert module_text(parse_module(whole[1])) == whole[1]  # the IR before it, printed whole


@pytest.mark.parametrize("frontend", ["ltc", "torchscript"])
def test_mlp_end_to_end_matches_native(frontend):
    torch.manual_seed(1)
    module, x = SmallMLP(), torch.randn(3, 6)
    compiled = compile_jit_module(module, (x,), frontend)
    try:
        torch.testing.assert_close(compiled(x), module(x))
        other = torch.randn(3, 6)  # the program is not specialized to the example's values
        torch.testing.assert_close(compiled(other), module(other))
    finally:
        compiled.close()


class VarArgs(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] + xs[1]


def test_torchscript_falls_back_to_trace_and_says_why():
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    compiled = compile_jit_module(VarArgs(), (a, b), "torchscript")
    assert compiled.lowered.notes["capture"] == "trace"
    assert "torch.jit.script" in compiled.lowered.notes["fallback_reason"]
    torch.testing.assert_close(compiled(a, b), a + b)


class Amax(torch.nn.Module):
    def forward(self, x):
        return x.amax(0) + 1


def test_ltc_refuses_ops_it_ran_eagerly():
    with pytest.raises(StageError) as caught:
        jit_to_torch_backend_ir(Amax(), (torch.randn(3, 4),), load_frontend("ltc"))
    assert caught.value.stage == "capture" and "aten::amax" in caught.value.message


class LazyDecomposed(torch.nn.Module):
    """Uses ops the LTC TorchScript backend lacks, traced through PyTorch's decompositions."""

    def forward(self, x, y):
        a = torch.nn.functional.hardtanh(x) + torch.nn.functional.mish(x) + torch.nn.functional.hardswish(y)
        b = torch.logical_and(x > 0, y > 0) | (x > 0.5)
        norms = torch.linalg.vector_norm(x, 2, 1), torch.count_nonzero(b, 1), torch.floor_divide(x, y.abs() + 1)
        return a, b, torch.dot(x[0], y[0]), *norms


def test_ltc_traces_ops_it_lacks_through_their_decompositions():
    from compiler.replay_runtime.frontend_step import LAZY_DECOMPOSED_OPS

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    compiled = compile_jit_module(LazyDecomposed(), (x, y), frontend="ltc")
    for got, expected in zip(compiled(x, y), LazyDecomposed()(x, y)):
        torch.testing.assert_close(got, expected)
    assert {"hardtanh", "mish", "dot", "floor_divide"} <= set(LAZY_DECOMPOSED_OPS)


class LogicalAndBroadcast(torch.nn.Module):
    def forward(self, x, y):
        return torch.logical_and(x, y), torch.diag(y > 0)  # diag of bool calls logical_and


def test_ltc_logical_and_broadcasts_without_a_view():
    # PyTorch's decomposition broadcasts with `expand`, a view the lazy device cannot
    # take below functionalization (as_strided): ours must not.
    x, y = torch.randn(5, 1), torch.randn(5)
    x[2] = 0
    compiled = compile_jit_module(LogicalAndBroadcast(), (x, y), frontend="ltc")
    for got, expected in zip(compiled(x, y), LogicalAndBroadcast()(x, y)):
        torch.testing.assert_close(got, expected)


class Rotations(torch.nn.Module):
    def forward(self, x):
        return tuple(
            torch.rot90(x, k, dims) for k, dims in [(1, (0, 1)), (2, (1, 2)), (3, (2, 0)), (-1, (1, 0)), (4, (0, 2))]
        )


def test_ltc_rot90_traces_without_an_in_place_view():
    # PyTorch's rot90 ends in transpose_, which the lazy device runs eagerly (as_strided_).
    x = torch.randn(5, 4, 3)
    compiled = compile_jit_module(Rotations(), (x,), frontend="ltc")
    for got, expected in zip(compiled(x), Rotations()(x)):
        torch.testing.assert_close(got, expected)


def test_a_bool_list_constant_held_as_ints_imports():
    # LTC's graph holds native_layer_norm_backward's output_mask as `bool[]` of ints.
    graph = torch._C.parse_ir(
        """graph(%g : Tensor, %x : Tensor, %mean : Tensor, %rstd : Tensor):
          %shape : int[] = prim::Constant[value=[4]]()
          %none : NoneType = prim::Constant()
          %mask : bool[] = prim::Constant[value=[1, 0, 0]]()
          %a : Tensor, %b : Tensor, %c : Tensor = aten::native_layer_norm_backward(%g, %x, %shape, %mean, %rstd, %none, %none, %mask)
          return (%a)"""
    )
    inputs = [TensorArg((3, 4), torch.float32)] * 2 + [TensorArg((3, 1), torch.float32)] * 2
    text = module_text(import_graph(graph, inputs).module)
    assert "torch.prim.ListConstruct %true, %false, %false_0 : (!torch.bool, !torch.bool, !torch.bool)" in text


class Factories(torch.nn.Module):
    def forward(self, x):
        return torch.arange(2, 8, dtype=torch.int32) + x, torch.eye(3) * 2, torch.linspace(0, 1, 5) + 1


def test_ltc_factories_enter_the_graph_as_constants():
    x = torch.randint(0, 5, (6,), dtype=torch.int32)
    compiled = compile_jit_module(Factories(), (x,), frontend="ltc")
    for got, expected in zip(compiled(x), Factories()(x)):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)


class Variances(torch.nn.Module):
    def forward(self, x):
        return torch.var_mean(x, 1, keepdim=True), torch.var(x, 0, unbiased=False), torch.var(x)


def test_ltc_variance_decomposition_matches_native():
    x = torch.randn(4, 6)
    compiled = compile_jit_module(Variances(), (x,), frontend="ltc")
    torch.testing.assert_close(compiled(x), Variances()(x))


class MaxDim(torch.nn.Module):
    def forward(self, x):
        return torch.max(x, dim=1)


def test_ltc_op_with_several_results_matches_native():
    # The lazy graph's text holds the op's unused named tuple, which parse_ir rejects.
    x = torch.randn(3, 5)
    compiled = compile_jit_module(MaxDim(), (x,), frontend="ltc")
    values, indices = compiled(x)
    expected = torch.max(x, dim=1)
    torch.testing.assert_close(values, expected.values)
    torch.testing.assert_close(indices, expected.indices)


class InputAndConstantOut(torch.nn.Module):
    def forward(self, x, y):
        return x.contiguous(), y + 1, torch.arange(3)


def test_ltc_outputs_that_are_inputs_or_constants_are_kept():
    # Such outputs have no lazy IR node of their own; the graph must still return them.
    x, y = torch.randn(2, 3), torch.randn(3)
    compiled = compile_jit_module(InputAndConstantOut(), (x, y), frontend="ltc")
    other = torch.randn(2, 3)
    torch.testing.assert_close(compiled(other, y), InputAndConstantOut()(other, y))


class SplitAtIndices(torch.nn.Module):
    def forward(self, x, indices, y):
        return tuple(part * y[: part.shape[0]] for part in torch.tensor_split(x, indices))


def test_ltc_keeps_index_tensors_torch_reads_on_the_host():
    # tensor_split requires its indices tensor on the CPU on any device; on the lazy device
    # it refuses them. Kept on the CPU, they fix the graph's slices; y after them is @main's.
    x, indices, y = torch.randn(6, 2), torch.tensor([1, 4]), torch.randn(6, 2)
    compiled = compile_jit_module(SplitAtIndices(), (x, indices, y), frontend="ltc")
    other = torch.randn(6, 2)
    torch.testing.assert_close(compiled(x, indices, other), SplitAtIndices()(x, indices, other))


# --- what real models bring ---------------------------------------------------------


class _OptionalMask(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, scale: float = 2.0) -> torch.Tensor:
        if mask is not None:
            x = x * mask
        return x * scale


def test_scripted_forward_fills_its_schema_defaults():
    x = torch.randn(3, 4)
    compiled = compile_jit_module(_OptionalMask(), (x,), frontend="torchscript")
    try:
        assert compiled.lowered.notes["capture"] == "script"
        torch.testing.assert_close(compiled(x), x * 2.0)
    finally:
        compiled.close()


class _TracedOnly(torch.nn.Module):
    """`**kwargs` cannot be scripted: torchscript traces it."""

    def forward(self, x, **kwargs):
        return torch.tanh(x @ x.transpose(0, 1)).sum(-1)


def test_traced_graph_keeps_the_shapes_the_trace_recorded():
    # Unranked `!torch.tensor` results crashed torch-mlir's passes on traced HF models.
    x = torch.randn(3, 4)
    captured = torchscript.capture(_TracedOnly(), (x,))
    assert captured.method == "trace"
    raw = module_text(import_graph(captured.graph, captured.graph_inputs).module)
    assert "!torch.tensor<[3,3],f32>" in raw  # the matmul's result, as recorded
    assert "!torch.tensor<[3],f32>" in raw  # the sum's
    compiled = compile_jit_module(_TracedOnly(), (x,), frontend="torchscript")
    try:
        torch.testing.assert_close(compiled(x), _TracedOnly()(x))
    finally:
        compiled.close()
