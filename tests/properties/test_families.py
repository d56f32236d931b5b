"""Property families on the linalg config: every generated example compiles and matches native torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from e2e.framework.registry import FunctionModule
from e2e.framework.testutils import TestUtils
from e2e.properties import families
from e2e.properties import strategies as s
from e2e.properties.check import PropertyFailure, check_compiles_like_native


def check(name: str, fn, inputs: list[torch.Tensor], dynamic: bool = False) -> None:
    dynamic_dims = [[-1] * x.dim() for x in inputs] if dynamic else None
    check_compiles_like_native(FunctionModule(fn), inputs, name=name, dynamic_dims=dynamic_dims)


FAMILIES = {family.name: family for family in families.FAMILIES}


def check_family(name: str, args, seed: int) -> None:
    """One example of a family (`e2e.properties.families`, which the e2e suite runs too)."""
    fn, inputs, dynamic = FAMILIES[name].build(args)
    check(name, fn, inputs(TestUtils(seed)), dynamic)


@given(FAMILIES["unary"].strategy, s.seeds)
def test_elementwise_unary(args, seed):
    check_family("unary", args, seed)


@given(FAMILIES["binary"].strategy, s.seeds)
def test_elementwise_binary_broadcasting(args, seed):
    check_family("binary", args, seed)


@given(FAMILIES["reduction"].strategy, s.seeds)
def test_reduction_over_dims(args, seed):
    check_family("reduction", args, seed)


@given(FAMILIES["compare"].strategy, s.seeds)
def test_comparisons_on_boundary_values(args, seed):
    check_family("compare", args, seed)


@given(
    s.dims,
    s.dims,
    s.dims,
    st.lists(s.dims, max_size=2),
    st.sampled_from(["matmul", "bmm", "linear"]),
    s.seeds,
    st.booleans(),
)
def test_matmul_shapes(m, k, n, batch, kind, seed, dynamic):
    tu = TestUtils(seed)
    if kind == "bmm":
        b = batch[0] if batch else 1
        inputs, fn = [tu.randn(b, m, k), tu.randn(b, k, n)], torch.bmm
    elif kind == "linear":
        inputs, fn = [tu.randn(*batch, m, k), tu.randn(n, k), tu.randn(n)], F.linear
    else:  # matmul broadcasts the batch dims of the left operand over a plain matrix
        inputs, fn = [tu.randn(*batch, m, k), tu.randn(k, n)], torch.matmul
    # Known bug, pinned below: batched lhs x matrix with dynamic dims computes wrong values.
    dynamic = dynamic and not (batch and kind in ("matmul", "linear"))
    check(f"matmul_{kind}", fn, inputs, dynamic)


@pytest.mark.xfail(
    strict=True,
    raises=PropertyFailure,
    reason="linalg: batched lhs @ matrix with dynamic dims gives wrong values (shrunk by "
    "test_matmul_shapes; e2e xfail Matmul3d2d_DynamicLeadingDims)",
)
def test_matmul_batched_lhs_dynamic_known_bug():
    tu = TestUtils(0)
    check("matmul_batched_dynamic", torch.matmul, [tu.randn(2, 2, 1), tu.randn(1, 1)], dynamic=True)


@given(s.shapes(min_rank=1), st.data(), s.seeds)
def test_permute_and_reshape(shape, data, seed):
    order = data.draw(st.permutations(range(len(shape))))
    split = data.draw(st.integers(0, len(shape)))
    numel = torch.Size(shape).numel()

    def fn(x):
        y = x.permute(*order).contiguous()
        return y.reshape(-1), y.reshape(torch.Size(shape[:split]).numel(), -1).t(), x.flatten().view(numel, 1)

    check("permute_reshape", fn, [TestUtils(seed).randn(*shape)])


@given(s.slice_case(), s.seeds, st.booleans())
def test_slice(case, seed, dynamic):
    shape, dim, start, stop, step = case
    check("slice", lambda x: torch.ops.aten.slice(x, dim, start, stop, step), [TestUtils(seed).randn(*shape)], dynamic)


@given(s.conv2d_case(), s.seeds)
def test_conv2d_parameters(case, seed):
    tu = TestUtils(seed)
    x = tu.randn(case["batch"], case["in_channels"], *case["size"])
    w = tu.randn(case["out_channels"], case["in_channels"] // case["groups"], case["kernel"], case["kernel"])
    bias = tu.randn(case["out_channels"]) if case["bias"] else None

    def conv(x, w):
        return F.conv2d(x, w, bias, case["stride"], case["padding"], case["dilation"], case["groups"])

    check("conv2d", conv, [x, w])


@given(FAMILIES["pool2d"].strategy, s.seeds)
def test_pool2d_parameters(args, seed):
    check_family("pool2d", args, seed)
