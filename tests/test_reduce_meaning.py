"""A reduction keeps the program meaning the same thing: literals stay literals, a size is not
replaced by the constant it was computed from, results the bug does not need are dropped."""

import time

from e2e.reducer.reduce import drop_result, reduce_ops, result_count

# `view(y, [size(x, 2)])` and a `max.dim` whose dim and keepdim are literals, returning an
# argument as it is beside them.
PROGRAM = """
func.func @main(%arg0: !torch.vtensor<[4,3,?],f32>, %arg1: !torch.vtensor<[?],f32>, %arg2: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[?],f32>, !torch.vtensor<[4,3],f32>, !torch.vtensor<[2],f32>) {
  %int2 = torch.constant.int 2
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %0 = torch.aten.size.int %arg0, %int2 : !torch.vtensor<[4,3,?],f32>, !torch.int -> !torch.int
  %1 = torch.prim.ListConstruct %0 : (!torch.int) -> !torch.list<int>
  %2 = torch.aten.view %arg1, %1 : !torch.vtensor<[?],f32>, !torch.list<int> -> !torch.vtensor<[?],f32>
  %values, %indices = torch.aten.max.dim %arg0, %int2, %false : !torch.vtensor<[4,3,?],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],si64>
  return %2, %values, %arg2 : !torch.vtensor<[?],f32>, !torch.vtensor<[4,3],f32>, !torch.vtensor<[2],f32>
}
"""


def _reduced(keeps) -> str:
    return reduce_ops(PROGRAM, keeps, deadline=time.monotonic() + 60).text


def test_a_literal_is_never_made_an_argument():
    text = _reduced(lambda candidate: "torch.aten.max.dim" in candidate)
    assert "torch.constant.int 2" in text and "torch.constant.bool false" in text, text
    signature = text.split("{")[0]
    assert "!torch.int" not in signature and "!torch.bool" not in signature, signature


def test_a_size_is_not_replaced_by_the_constant_it_was_read_with():
    # Bypassing `size.int` with its operand of the same type, `%int2`, would make the view's size 2.
    text = _reduced(lambda candidate: "torch.aten.view" in candidate)
    assert "torch.aten.size.int" in text, text


def test_results_the_bug_does_not_need_are_dropped():
    text = _reduced(lambda candidate: "torch.aten.view" in candidate)
    assert result_count(text) == 1 and "%arg2" not in text.split("{", 1)[1], text
    assert "torch.aten.max.dim" not in text
    assert drop_result(text, 0) is None or result_count(drop_result(text, 0)) == 0


def test_out_of_time_a_reduction_still_drops_the_arguments_it_returns_as_they_came():
    text = reduce_ops(PROGRAM, lambda candidate: "torch.aten.max.dim" in candidate, deadline=time.monotonic()).text
    assert "%arg2" not in text.split("return", 1)[1], text  # returned as it came in: dropped
    assert "torch.aten.max.dim" in text
