import math

import pytest
import torch

from compiler.replay_runtime import compare  # the tensor comparison and its chunk size
from e2e.framework.compare import compare_traces, compare_values
from e2e.framework.registry import Tolerance
from e2e.framework.trace import TraceItem


def check(golden, actual, tolerance=None):
    return compare_values(golden, actual, "output", tolerance)


def test_equal_floats_pass_and_small_error_is_within_the_float32_tolerance():
    x = torch.tensor([1.0, 2.0, 3.0])
    assert check(x, x.clone()) is None
    assert check(x, x * (1 + 1e-6)) is None


def test_value_mismatch_reports_where_and_how_much():
    golden = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    actual = golden.clone()
    actual[1, 0] = 3.5
    mismatch = check(golden, actual)
    assert mismatch.kind == "values"
    assert "1 of 4 elements differ" in mismatch.detail
    assert "first at index (1, 0)" in mismatch.detail
    assert "max abs error 0.5" in mismatch.detail


def test_golden_zero_is_never_divided_by():
    golden = torch.zeros(3)
    actual = torch.tensor([0.0, 0.0, 1.0])
    mismatch = check(golden, actual)
    assert mismatch.kind == "values"
    assert "inf" not in mismatch.detail
    # With only zeros in the golden there is no relative error to report.
    assert "max rel error nan" in mismatch.detail


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64])
def test_chunked_comparison_reports_what_a_whole_comparison_does(monkeypatch, dtype):
    golden = torch.arange(1, 31, dtype=dtype).reshape(2, 3, 5)
    actual = golden.clone()
    actual[0, 2, 1] += 7  # flat 11: the third chunk of four
    actual[1, 2, 4] += 2  # flat 29: the last, partial chunk
    whole = check(golden, actual)
    monkeypatch.setattr(compare, "CHUNK", 4)
    chunked = check(golden, actual)
    assert chunked.detail == whole.detail
    assert "2 of 30 elements differ" in chunked.detail
    assert "first at index (0, 2, 1)" in chunked.detail
    assert "max abs error 7" in chunked.detail
    if dtype.is_floating_point:
        actual = golden.clone()
        golden[1, 0, 3] = actual[0, 0, 2] = math.nan
        nan = check(golden, actual)
        assert nan.kind == "nan" and "2 NaN positions differ, first at index (0, 0, 2)" in nan.detail


def test_integers_and_bools_compare_exactly():
    assert check(torch.tensor([1, 2]), torch.tensor([1, 3])).kind == "values"
    assert check(torch.tensor([True, False]), torch.tensor([True, True])).kind == "values"
    assert check(torch.tensor([1, 2]), torch.tensor([1, 2])) is None


def test_nan_positions_must_match():
    golden = torch.tensor([1.0, math.nan])
    assert check(golden, torch.tensor([1.0, math.nan])) is None
    assert check(golden, torch.tensor([math.nan, 1.0])).kind == "nan"


def test_wrong_numbers_make_a_values_mismatch_whether_or_not_some_are_nan():
    # A program reading memory it never wrote returns garbage that holds a NaN on some
    # runs only; both runs must fail the same way.
    golden = torch.tensor([1.0, 2.0, 3.0, 4.0])
    without_nan = check(golden, torch.tensor([1.0, 9.0, 3.0, 7.0]))
    with_nan = check(golden, torch.tensor([1.0, 9.0, math.nan, 7.0]))
    assert without_nan.kind == with_nan.kind == "values"
    assert "2 of 4 elements differ" in with_nan.detail and "max abs error 7" in with_nan.detail
    assert "1 NaN positions differ, first at index (2,)" in with_nan.detail


def test_infinities_must_match_in_sign():
    golden = torch.tensor([math.inf, -math.inf])
    assert check(golden, golden.clone()) is None
    assert check(golden, torch.tensor([math.inf, math.inf])).kind == "values"


def test_shape_and_dtype_are_checked():
    x = torch.ones(2, 3)
    assert check(x, torch.ones(3, 2)).kind == "shape"
    assert check(x, torch.ones(2, 3, dtype=torch.float64)).kind == "dtype"


@pytest.mark.parametrize(
    "dtype, error, passes",
    [
        (torch.float16, 1e-3, True),
        (torch.float16, 5e-2, False),
        (torch.bfloat16, 1e-2, True),
        (torch.float64, 1e-6, False),
    ],
)
def test_tolerance_comes_from_the_dtype_table(dtype, error, passes):
    golden = torch.ones(4, dtype=dtype)
    actual = (golden.double() * (1 + error)).to(dtype)
    assert (check(golden, actual) is None) == passes


def test_per_test_tolerance_overrides_the_table():
    golden = torch.ones(3)
    actual = golden * 1.01
    assert check(golden, actual) is not None
    assert check(golden, actual, Tolerance(rtol=0.02, atol=0.0)) is None


def test_nested_outputs_name_the_path():
    golden = {"a": (torch.ones(2), [torch.zeros(1), 3]), "b": None}
    actual = {"a": (torch.ones(2), [torch.zeros(1), 4]), "b": None}
    mismatch = check(golden, actual)
    assert mismatch.where == "output['a'][1][1]"
    assert check(golden, {"a": (torch.ones(2), [torch.zeros(1), 3]), "b": None}) is None
    assert check((torch.ones(1),), (torch.ones(1), torch.ones(1))).kind == "structure"


def test_unsupported_output_type_is_a_clear_error():
    mismatch = check("text", "text")
    assert mismatch.kind == "type"
    assert "outputs must be tensors" in mismatch.detail


def test_trace_mismatch_names_the_trace_item():
    golden = [TraceItem("forward", [], torch.ones(1)), TraceItem("forward", [], torch.ones(1))]
    actual = [TraceItem("forward", [], torch.ones(1)), TraceItem("forward", [], torch.zeros(1))]
    mismatch = compare_traces(golden, actual)
    assert mismatch.where.startswith("trace item #1 (forward)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64])
def test_agree_judges_as_the_full_comparison(monkeypatch, dtype):
    from e2e.framework.compare import agree

    monkeypatch.setattr(compare, "CHUNK", 4)
    golden = torch.arange(1, 31, dtype=dtype)
    assert agree(golden, golden.clone())
    late = golden.clone()
    late[29] += 2  # the last, partial chunk: every chunk before it is equal
    assert not agree(golden, late) and check(golden, late) is not None
    if dtype.is_floating_point:
        close = golden * (1 + 1e-5)  # within the tolerance, not equal
        assert agree(golden, close) and check(golden, close) is None
        golden[5] = close[5] = math.nan  # NaN in both: equal, though NaN != NaN
        assert agree(golden, close) and check(golden, close) is None
        close[6] = math.nan
        assert not agree(golden, close) and check(golden, close).kind == "nan"


def test_first_only_stops_at_the_first_differing_chunk(monkeypatch):
    monkeypatch.setattr(compare, "CHUNK", 4)
    golden = torch.zeros(12)
    actual = golden.clone()
    actual[5], actual[11] = 1.0, math.nan
    first = compare_values(golden, actual, "output", None, first_only=True)
    assert first.kind == "values" and "(5,)" in first.detail
    whole = check(golden, actual)
    assert "1 of 12 elements differ" in whole.detail and "1 NaN positions differ" in whole.detail


def test_equal_signed_zeros_pass():
    assert check(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])) is None


def test_complex_half_compares_though_torch_has_no_equal_kernel_for_it():
    golden = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64).to(torch.complex32)
    assert compare_values(golden, golden.clone(), "out", None) is None
    other = torch.tensor([1 + 2j, -3 + 1.5j], dtype=torch.complex64).to(torch.complex32)
    assert compare_values(golden, other, "out", None).kind == "values"
