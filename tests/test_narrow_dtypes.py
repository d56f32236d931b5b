"""complex<f16> and the four float8 types, end to end: real programs through the real
RefBackend (and IREE, with the runtimes extra), compared bit for bit."""

import numpy as np
import pytest
import torch

from compiler import StageError
from compiler.backend_compile import compile_torch_backend_ir
from compiler.compiled_module import compile_module
from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.refbackend import from_storage_array, result_dtypes, to_storage_array
from tests.extras import requires_extra

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz]


class Apply(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *xs):
        return self.function(*xs)


def every_float8(dtype: torch.dtype) -> torch.Tensor:
    """All 256 values of a float8 type, NaNs and infinities included."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)


def test_a_complex_f16_result_round_trips_exact_values():
    real = torch.tensor([1.5, -0.0, 65504.0, 2.0**-24, float("inf")], dtype=torch.float16)
    imaginary = torch.tensor([-3.25, 1.0, -65504.0, 1e-3, 0.5], dtype=torch.float16)

    out = compile_module(Apply(torch.complex), [real, imaginary], "linalg")(real, imaginary)

    assert out.dtype == torch.complex32 and out.shape == (5,)
    assert torch.equal(torch.view_as_real(out).view(torch.int16), torch.stack([real, imaginary], -1).view(torch.int16))


def test_a_complex_f16_argument_comes_back_bit_for_bit_at_any_size():
    x = torch.view_as_complex(torch.tensor([[1.5, -3.25], [65504.0, 2.0**-24], [-0.0, 7.0]]).half())
    compiled = compile_module(Apply(lambda x: x.clone()), [x], "linalg", dynamic_dims=[[-1]])
    for argument in (x, x[:2].contiguous()):
        out = compiled(argument)
        assert out.dtype == torch.complex32
        assert torch.equal(out.view(torch.int32), argument.view(torch.int32))


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_a_float8_argument_and_result_round_trip_all_256_values(dtype):
    x = every_float8(dtype)
    out = compile_module(Apply(lambda x: x.clone()), [x], "linalg")(x)
    assert out.dtype == dtype
    assert torch.equal(out.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_values_widen_exactly(dtype):
    x = every_float8(dtype)
    out = compile_module(Apply(lambda x: x.to(torch.float32)), [x], "linalg")(x)
    expected = x.to(torch.float32)
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(0.0).view(torch.int32), expected.nan_to_num(0.0).view(torch.int32))


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_results_round_to_nearest_even_as_torch_does(dtype):
    """Every f16 value (ties, subnormals, overflow, infinities, NaN) converted to float8:
    the bits torch gives, except where torch's float8_e4m3fn saturates (past 464, halfway
    to the next power, and infinities become 448) and MLIR's arith.truncf gives NaN, as
    LLVM's APFloat does."""
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16)
    out = compile_module(Apply(lambda x: x.to(dtype)), [x], "linalg")(x)
    assert out.dtype == dtype
    expected = x.to(dtype)
    saturated = (x.float().abs() > 464) & (dtype == torch.float8_e4m3fn)
    out_nan, expected_nan = out.float().isnan(), expected.float().isnan()
    same = (out.view(torch.uint8) == expected.view(torch.uint8)) | (out_nan & expected_nan)
    assert bool(same[~saturated].all()), x[~saturated & ~same][:8]
    assert bool(out_nan[saturated].all()) and bool(saturated.any()) == (dtype == torch.float8_e4m3fn)


def test_float8_arithmetic_is_done_in_f32_and_rounded_once():
    # torch has no float8 kernels (x * y raises): the product of the values, rounded once.
    x = torch.tensor([1.0, 1.125, -3.5, 448.0, 0.015625, 1.375]).to(torch.float8_e4m3fn)
    y = torch.tensor([0.0625, 2.0, 0.75, 0.5, 0.001953125, 1.125]).to(torch.float8_e4m3fn)
    out = compile_module(Apply(lambda x, y: x * y), [x, y], "linalg")(x, y)
    expected = (x.float() * y.float()).to(torch.float8_e4m3fn)
    assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))


def test_complex_f16_and_float8_cross_storage_arrays_exactly():
    c = torch.view_as_complex(torch.tensor([[1.5, -3.25], [float("inf"), -0.0]]).half())
    assert to_storage_array(c).dtype.names == ("real", "imag")
    assert torch.equal(from_storage_array(to_storage_array(c), None).view(torch.int32), c.view(torch.int32))
    assert to_storage_array(c[0]).shape == ()
    for dtype in FLOAT8:
        x = every_float8(dtype)
        assert to_storage_array(x).dtype == np.uint8
        assert torch.equal(from_storage_array(to_storage_array(x), dtype).view(torch.uint8), x.view(torch.uint8))


def test_the_result_types_read_from_torch_ir_include_complex_f16_and_float8():
    text = (
        "func.func @main(%arg0: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],complex<f16>>, "
        "!torch.vtensor<[],f8E4M3FN>, !torch.vtensor<[2],f8E4M3FNUZ>, !torch.vtensor<[2],f8E5M2>, "
        "!torch.vtensor<[2],f8E5M2FNUZ>) {"
    )
    assert result_dtypes(text) == [torch.complex32, *FLOAT8]


@requires_extra("runtimes", "iree.compiler", "iree.runtime")
@pytest.mark.parametrize("dtype", [torch.float8_e5m2, torch.complex32], ids=str)
def test_iree_takes_and_returns_float8_and_complex_f16_bit_for_bit(dtype):
    # numpy has no complex32 (nor IREE's Python enum its element type): it crosses as raw bits.
    x = every_float8(dtype) if dtype.is_floating_point else torch.arange(64, dtype=torch.int32).view(dtype)
    torch_ir, _ = fx_to_torch_backend_ir(Apply(lambda x: x.clone()), [x], None)
    program = compile_torch_backend_ir(torch_ir, "linalg", executor="iree")
    try:
        (out,) = program(x)
    finally:
        program.close()
    bits = torch.uint8 if dtype.is_floating_point else torch.int32
    assert out.dtype == dtype and torch.equal(out.view(bits), x.view(bits))


@requires_extra("runtimes", "jax", "jaxlib")
def test_a_runtime_that_cannot_return_complex_f16_refuses_it_at_lower_naming_itself():
    from compiler.executors import load_executor
    from compiler.stages import Snapshots, new_context, parse_module

    text = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %a : tensor<2xf32>\n}"
    with pytest.raises(StageError, match="the StableHLO interpreter cannot return result 0: .* numpy has no"):
        load_executor("interp").program_for(parse_module(text, new_context()), [torch.complex32], Snapshots())


FLOAT8_STABLEHLO = """func.func @main(%a: tensor<256xf8E4M3FNUZ>, %b: tensor<4xf32>) ->
    (tensor<256xf8E4M3FNUZ>, tensor<4xf8E5M2>) {
  %0 = stablehlo.negate %a : tensor<256xf8E4M3FNUZ>
  %1 = stablehlo.convert %b : (tensor<4xf32>) -> tensor<4xf8E5M2>
  return %0, %1 : tensor<256xf8E4M3FNUZ>, tensor<4xf8E5M2>
}"""


@pytest.mark.parametrize("executor", ["refbackend", "interp", "xla", "iree"])
def test_every_executor_of_stablehlo_takes_and_returns_float8(executor):
    from compiler.executors import load_executor
    from compiler.stages import Snapshots, new_context, parse_module

    loaded = load_executor(executor, input="stablehlo")
    if loaded.missing():
        pytest.skip(f"{executor} not installed: {loaded.missing()}")
    program = loaded.program_for(
        parse_module(FLOAT8_STABLEHLO, new_context()), [torch.float8_e4m3fnuz, torch.float8_e5m2], Snapshots()
    )
    a = every_float8(torch.float8_e4m3fnuz)
    b = torch.tensor([1.0, 1e9, 0.3, -2.5])  # 1e9 overflows to infinity
    try:
        negated, converted = program(a, b)
    finally:
        program.close()
    assert (negated.dtype, converted.dtype) == (torch.float8_e4m3fnuz, torch.float8_e5m2)
    assert torch.equal(negated.view(torch.uint8), (-a.float()).to(torch.float8_e4m3fnuz).view(torch.uint8))
    assert converted.view(torch.uint8).tolist() == [0x3C, 0x7C, 0x35, 0xC1]
