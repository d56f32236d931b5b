"""Marshalling through the reference backend, one real compile per case."""

import ctypes
import platform

import numpy as np
import pytest
import torch

from compiler import StageError
from compiler.compiled_module import compile_module
from compiler.refbackend import DTYPES, UnsupportedDType, from_storage_array, to_storage_array
from compiler.replay_runtime import target
from compiler.replay_runtime.memref_call import UnrankedMemRef, ranked_memref_type, read_results
from compiler.replay_runtime.passes import output_dim_innermost
from compiler.stages import new_context, parse_module
from tests.extras import requires_extra


class Identity(torch.nn.Module):
    def forward(self, *xs):
        return tuple(x.clone() for x in xs)


def values(dtype, *shape):
    if dtype == torch.bool:
        return torch.arange(6).reshape(2, 3)[..., : shape[-1]].reshape(shape) % 2 == 0
    if dtype.is_complex:
        return torch.complex(torch.randn(*shape), torch.randn(*shape)).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, info.max, 7, 0, 1, 2][: shape[-1] * shape[0]], dtype=dtype).reshape(shape)


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bits, which torch.equal compares for any dtype (it has no complex32 kernel)."""
    if tensor.dtype == torch.complex32:
        return tensor.view(torch.int32)
    return tensor.view(torch.uint8) if tensor.dtype.is_floating_point and tensor.element_size() == 1 else tensor


def test_every_table_dtype_round_trips_through_one_compiled_call():
    """f16, bf16, f32, f64, bool, i8, u8, i16, i32, i64, c32, c64, c128 and the four float8
    types as arguments and results, bit for bit."""
    # uint16/32/64 are in the table but not in torch-mlir's FX importer (a KeyError there):
    # they come from StableHLO (test_executors.py's unsigned test).
    inputs = [values(dtype, 2, 3) for dtype in DTYPES if dtype not in (torch.uint16, torch.uint32, torch.uint64)]
    compiled = compile_module(Identity(), inputs, "linalg")
    outputs = compiled(*inputs)
    assert len(outputs) == len(inputs)
    for x, y in zip(inputs, outputs):
        assert y.dtype == x.dtype
        assert torch.equal(bits(x), bits(y)), x.dtype


def test_zero_d_and_several_results_keep_their_structure():
    class M(torch.nn.Module):
        def forward(self, x):
            return {"sum": x.sum(), "pair": [x * 2, (x.max(),)]}

    x = torch.randn(3, 4)
    out = compile_module(M(), [x], "linalg")(x)
    assert out["sum"].shape == ()
    torch.testing.assert_close(out["sum"], x.sum())
    torch.testing.assert_close(out["pair"][0], x * 2)
    torch.testing.assert_close(out["pair"][1][0], x.max())


def test_dynamic_dims_accept_other_sizes():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x) + 1

    compiled = compile_module(M(), [torch.randn(3, 4)], "linalg", dynamic_dims=[[-1, -1]])
    for shape in [(3, 4), (7, 2)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), torch.tanh(x) + 1)


def test_non_contiguous_inputs_are_marshalled_by_value():
    x = torch.randn(4, 3).t()
    torch.testing.assert_close(compile_module(Identity(), [x], "linalg")(x)[0], x)


def test_views_with_an_offset_and_a_conjugate_bit_are_passed_by_value():
    x = torch.randn(5, 7)[1:, 2:]  # storage offset 9, row stride 7
    z = torch.complex(torch.randn(2, 3), torch.randn(2, 3)).conj()  # conj bit set, data not conjugated
    compiled = compile_module(Identity(), [x, z], "linalg")
    for _ in range(2):  # the second call reuses the first call's descriptors
        got_x, got_z = compiled(x, z)
        assert torch.equal(got_x, x)
        assert torch.equal(got_z, z.resolve_conj())


def test_results_are_freed_once_copied_out():
    """Every call's result buffer (4 MiB here) is the program's `malloc`: 50 calls leak
    200 MiB unless `read_results` frees them."""

    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    def resident_mib() -> float:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096 / 2**20

    x = torch.randn(1024, 1024)
    compiled = compile_module(M(), [x], "linalg")
    compiled(x)
    before = resident_mib()
    for _ in range(50):
        y = compiled(x)
    assert resident_mib() - before < 100
    assert torch.equal(y, x + 1)


def test_a_strided_memref_is_read_by_its_strides_and_memory_passed_in_is_not_freed():
    memory = torch.arange(12, dtype=torch.int64)
    descriptor = ranked_memref_type(2)()
    descriptor.allocated = memory.data_ptr()
    descriptor.aligned = memory.data_ptr()
    descriptor.offset = 1
    descriptor.shape[:] = (3, 2)
    descriptor.strides[:] = (1, 4)  # a transposed view of memory[1:9].reshape(2, 4)[:, :3]
    unranked = UnrankedMemRef(2, ctypes.addressof(descriptor))
    (result,) = read_results([ctypes.addressof(unranked)], [torch.int64], [memory.data_ptr()])
    assert torch.equal(result, torch.tensor([[1, 5], [2, 6], [3, 7]]))
    assert result.is_contiguous()
    assert torch.equal(memory, torch.arange(12))  # still ours: freeing it would abort at exit


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(UnsupportedDType, match="cannot pass torch.float8_e8m0fnu tensors"):
        to_storage_array(torch.zeros(2, dtype=torch.float8_e8m0fnu))


def test_bf16_storage_is_bit_exact():
    x = torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16)
    assert torch.equal(from_storage_array(to_storage_array(x), torch.bfloat16), x)


def test_a_failing_pass_is_localized_with_the_ir_before_it():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.erfinv(x)  # no TOSA lowering

    with pytest.raises(StageError) as error:
        compile_module(M(), [torch.rand(3)], "tosa")
    assert error.value.stage == "backend"
    assert error.value.failing_pass.startswith("func.func(convert-torch-to-tosa")
    assert "torch.aten.erfinv" in error.value.message
    assert "torch.aten.erfinv" in error.value.input_ir


def test_copies_between_strided_buffers_run_without_the_c_runner_utils():
    """A dynamic slice lowers to `memrefCopy`, which the wheel does not ship."""

    class M(torch.nn.Module):
        def forward(self, x):
            return x[: x.shape[0] // 2] * 2

    x = torch.randn(6, 3)
    compiled = compile_module(M(), [x], "linalg", dynamic_dims=[[-1, -1]])
    torch.testing.assert_close(compiled(x), x[:3] * 2)


GENERIC = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %c: tensor<4x5xf32>, %r: tensor<4xf32>)
    -> (tensor<4x5xf32>, tensor<4xf32>) {
  %mm = linalg.generic {
      indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                       affine_map<(i, j, k) -> (i, j)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x5xf32>) outs(%c : tensor<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %z, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %rows = linalg.generic {
      indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x8xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%x: f32, %z: f32):
    %s = arith.addf %z, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %mm, %rows : tensor<4x5xf32>, tensor<4xf32>
}
"""


def test_output_dim_innermost_reorders_a_matmul_but_not_a_row_sum():
    module = parse_module(GENERIC, new_context())
    output_dim_innermost(module)
    matmul, row_sum = [op for op in module.body.operations[0].regions[0].blocks[0].operations][:2]

    def loops(op):
        iterators = [
            str(i).removeprefix("#linalg.iterator_type<").removesuffix(">") for i in op.attributes["iterator_types"]
        ]
        return iterators, [str(m).removeprefix("affine_map<").removesuffix(">") for m in op.attributes["indexing_maps"]]

    # matmul (i, j, k) -> (i, k, j): B and the output are read along the innermost dim.
    assert loops(matmul) == (
        ["parallel", "reduction", "parallel"],
        ["(d0, d1, d2) -> (d0, d1)", "(d0, d1, d2) -> (d1, d2)", "(d0, d1, d2) -> (d0, d2)"],
    )
    # a row sum keeps its order: its output dim would read A down a column.
    assert loops(row_sum) == (["parallel", "reduction"], ["(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0)"])


def test_matmul_and_convolution_at_o2_give_the_bits_o0_gives(monkeypatch):
    """O2 lowers with `output_dim_innermost` and the packed matmul kernel; each output
    element sums in the same order. Where every target fuses multiply-adds (not x86-64,
    whose default has no FMA) the matmuls round once a step at O2: close, not the same
    bits (`test_matmul_kernel.py`)."""
    if platform.machine() == "x86_64":
        monkeypatch.setenv(target.ENV, "x86-64-v2")
    fused = target.jit_target().fuses_multiply_add()

    class M(torch.nn.Module):
        def forward(self, a, b, x, w):
            return a @ b, torch.nn.functional.conv2d(x, w, padding=1), torch.bmm(x[0], x[1].transpose(1, 2))

    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator) for shape in [(9, 33), (33, 17), (2, 3, 6, 7), (4, 3, 3, 3)]]
    o0 = compile_module(M(), inputs, "linalg", opt_level=0)(*inputs)
    o2 = compile_module(M(), inputs, "linalg", opt_level=2)(*inputs)
    matmuls = (0, 2)
    for i, (at_o0, at_o2) in enumerate(zip(o0, o2)):
        if fused and i in matmuls:
            torch.testing.assert_close(at_o2, at_o0, rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(at_o0, at_o2)
    torch.testing.assert_close(o2[0], inputs[0] @ inputs[1], rtol=1e-5, atol=1e-5)


def test_a_zero_dim_tensor_keeps_its_shape_in_storage():
    """np.ascontiguousarray makes a 0-d array 1-d: a bundle of a 0-d bf16 input then gave the
    replay a (1,) array where the program takes ()."""
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.tensor(1.5, dtype=dtype)
        assert to_storage_array(x).shape == ()
        assert torch.equal(from_storage_array(to_storage_array(x), dtype), x)


@requires_extra("runtimes", "ml_dtypes")
def test_the_interpreters_bf16_result_of_zero_dims_stays_zero_dim():
    import ml_dtypes

    from compiler.executors.interp import Element, read_results

    bits = np.array(16320, dtype=np.int16)  # 1.5 in bf16
    (value,) = read_results([bits], [Element(np.dtype(ml_dtypes.bfloat16), "bits")])
    assert value.shape == () and float(value) == 1.5


def test_programs_lowered_together_give_each_its_own_results_and_load_again_together():
    from compiler.backend_compile import stage_torch_backend_ir
    from compiler.frontends.fx import fx_to_torch_backend_ir
    from compiler.refbackend import LoweredBatch, lower_together
    from compiler.stages import Snapshots, new_context

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    class Less(torch.nn.Module):  # another result type: another return callback
        def forward(self, x, y):
            return x < y

    class Twice(torch.nn.Module):  # the same result type as Add: one callback for both
        def forward(self, x):
            return x * 2

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    cases = [(Add(), (x, y), x + y), (Less(), (x, y), x < y), (Twice(), (x,), x * 2)]
    context = new_context()
    staged = [
        stage_torch_backend_ir(
            fx_to_torch_backend_ir(module, list(inputs))[0],
            "linalg",
            snapshots=Snapshots(),
            opt_level=0,
            context=context,
        )
        for module, inputs, _ in cases
    ]
    programs, batch = lower_together(staged, keep_text=True)
    assert isinstance(batch, LoweredBatch) and len({id(p._engine) for p in programs}) == 1
    for program, (_, inputs, expected) in zip(programs, cases):
        torch.testing.assert_close(program(*inputs)[0], expected)
    again = batch.load()
    for (entry, _, _), (_, inputs, expected) in zip(batch.entries, cases):
        torch.testing.assert_close(again[entry](*inputs)[0], expected)
