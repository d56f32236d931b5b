"""Marshalling through the reference backend, one real compile per case."""

import pytest
import torch

from compiler import StageError, compile_module
from compiler.refbackend import DTYPES, UnsupportedDType, from_storage_array, to_storage_array


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


def test_every_table_dtype_round_trips_through_one_compiled_call():
    """f16, bf16, f32, f64, bool, i8, u8, i16, i32, i64, c64, c128 as arguments and results."""
    # uint16/32/64 are in the table but not in torch-mlir's FX importer (a KeyError there):
    # they come from StableHLO (test_executors.py's unsigned test).
    inputs = [values(dtype, 2, 3) for dtype in DTYPES if dtype not in (torch.uint16, torch.uint32, torch.uint64)]
    compiled = compile_module(Identity(), inputs, "linalg")
    outputs = compiled(*inputs)
    assert len(outputs) == len(inputs)
    for x, y in zip(inputs, outputs):
        assert y.dtype == x.dtype
        assert torch.equal(x, y), x.dtype


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


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(UnsupportedDType, match="cannot pass torch.float8_e5m2 tensors"):
        to_storage_array(torch.zeros(2, dtype=torch.float8_e5m2))


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
