"""The torch dialect's type check: which op's declared shape its operands contradict, and
after which pass of a pipeline that first happens (`compiler.type_check`)."""

from __future__ import annotations

from torch_mlir import ir

from compiler.stages import new_context, parse_module
from compiler.toolchain import toolchain
from compiler.type_check import TYPES_AGREE, first_disagreement, where_types_broke

ADD = """
func.func @main(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3],f32>) -> !torch.vtensor<{declared},f32> {{
  %int1 = torch.constant.int 1
  %0 = torch.aten.add.Tensor %a, %b, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<{declared},f32>
  return %0 : !torch.vtensor<{declared},f32>
}}
"""


def _check(text: str):
    return first_disagreement(parse_module(text, new_context()))


def test_an_op_whose_declared_shape_its_operands_give_agrees():
    assert _check(ADD.format(declared="[2,3]")) is None
    assert _check(ADD.format(declared="[?,3]")) is None  # a dynamic dim agrees with any size


def test_an_op_that_declares_another_shape_than_broadcasting_gives_is_named():
    found = _check(ADD.format(declared="[3]"))
    assert found is not None and found.op == "torch.aten.add.Tensor"
    assert (found.declared, found.computed) == ("!torch.vtensor<[3],f32>", "!torch.vtensor<[2,3],f32>")


def test_a_dim_that_follows_a_dynamic_operand_is_not_judged_but_a_static_one_is():
    text = """
    func.func @main(%a: !torch.vtensor<[1,?,1,1],si64>, %b: !torch.vtensor<[2],si64>) -> !torch.vtensor<{declared},si64> {{
      %0 = torch.aten.fmod.Tensor %a, %b : !torch.vtensor<[1,?,1,1],si64>, !torch.vtensor<[2],si64> -> !torch.vtensor<{declared},si64>
      return %0 : !torch.vtensor<{declared},si64>
    }}
    """
    assert _check(text.format(declared="[1,?,1,2]")) is None
    assert _check(text.format(declared="[1,4,1,2]")) is None  # the ? is 4 at run time for all the check knows
    found = _check(text.format(declared="[1,?,1,1]"))
    assert found is not None and found.computed == "!torch.vtensor<[1,?,1,2],si64>"


def test_an_op_with_an_operand_computed_at_run_time_is_not_judged():
    text = """
    func.func @main(%a: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[5],f32> {
      %int0 = torch.constant.int 0
      %n = torch.aten.size.int %a, %int0 : !torch.vtensor<[2,3],f32>, !torch.int -> !torch.int
      %list = torch.prim.ListConstruct %n : (!torch.int) -> !torch.list<int>
      %0 = torch.aten.view %a, %list : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[5],f32>
      return %0 : !torch.vtensor<[5],f32>
    }
    """
    assert _check(text) is None


def mistype_add(module: ir.Module) -> None:
    """A pass of this test's own (`python:tests.test_type_check:mistype_add`): it gives
    every `add.Tensor` result the type of its second operand, as a wrong shape function would."""
    for function in module.body.operations:
        for op in function.regions[0].blocks[0].operations:
            if op.operation.name == "torch.aten.add.Tensor":
                op.operation.results[0].set_type(op.operation.operands[1].type)


def test_the_first_pass_after_which_types_disagree_is_named():
    pipeline = ("func.func(canonicalize)", "python:tests.test_type_check:mistype_add", "func.func(cse)")
    broke = where_types_broke(ADD.format(declared="[2,3]"), pipeline)
    assert broke is not None and broke.pass_entry == "python:tests.test_type_check:mistype_add"
    assert broke.disagreement.op == "torch.aten.add.Tensor"
    assert where_types_broke(ADD.format(declared="[3]"), pipeline) is None  # its input disagreed already
    assert where_types_broke(ADD.format(declared="[2,3]"), ("func.func(canonicalize)",)) is None


# Two of torch-mlir's own (the pinned wheel's), as the campaign found them.


def test_fmods_shape_function_is_named_inside_the_backend_contract_pass():
    """`aten.fmod.Tensor`'s shape function is `unary(self)`: torch-mlir types the broadcast
    result as the first operand. The failing pass (`convert-torch-to-linalg`) only trips
    over it; the check names the step of the contract pass that applies the shape function
    (inside a `torch.shape.calculate` region, the op not yet given a dtype)."""
    text = """
    func.func @main(%a: !torch.tensor {torch.type_bound = !torch.vtensor<[1,?,1,1],si64>},
                    %b: !torch.tensor {torch.type_bound = !torch.vtensor<[2],si64>}) -> !torch.tensor {
      %0 = torch.aten.fmod.Tensor %a, %b : !torch.tensor, !torch.tensor -> !torch.tensor
      return %0 : !torch.tensor
    }
    """
    broke = where_types_broke(text, toolchain("torchscript", "linalg").to_torch_backend)
    assert broke is not None, "torch-mlir's fmod shape function types the broadcast right now: drop this test"
    assert broke.pass_entry.startswith("torch-lower-to-backend-contract > iteration 1: ")
    # The pass that applies the shape function, before dtype refinement gave the result a dtype.
    assert broke.pass_entry.endswith("func.func(torch-simplify-shape-calculations)")
    assert broke.disagreement.op == "torch.aten.fmod.Tensor"
    assert broke.disagreement.computed == "!torch.vtensor<[1,?,1,2],unk>"
    # The inner step alone, on the module the replay gave it, breaks the types again.
    assert broke.step in broke.pass_entry and broke.replay_pipeline() == [TYPES_AGREE, broke.step, TYPES_AGREE]
    signature = _replays(broke)
    assert signature is not None and "torch.aten.fmod.Tensor declares" in str(signature)


def test_a_fold_that_returns_a_value_of_another_type_names_the_folded_op():
    """`where(c, x, x)` folds to `x`, dropping the broadcast to `c`'s shape: the verifier
    rejects the function's return in the pass whose greedy rewrite folded it; the check
    names the op whose result was replaced."""
    text = """
    func.func @main(%x: !torch.vtensor<[?,1,?],f32>, %c: !torch.vtensor<[?,4,3],i1>) -> !torch.vtensor<[?,4,3],f32> {
      %0 = torch.aten.where.self %c, %x, %x : !torch.vtensor<[?,4,3],i1>, !torch.vtensor<[?,1,?],f32>, !torch.vtensor<[?,1,?],f32> -> !torch.vtensor<[?,4,3],f32>
      return %0 : !torch.vtensor<[?,4,3],f32>
    }
    """
    broke = where_types_broke(text, toolchain("fx", "tosa").to_torch_backend)
    assert broke is not None, "torch-mlir's where.self fold keeps the broadcast right now: drop this test"
    assert broke.disagreement.op == "torch.aten.where.self" and broke.disagreement.replaced_in == "main"
    assert "a fold or rewrite of torch.aten.where.self" in broke.describe()


def test_static_operands_torch_refuses_are_a_disagreement():
    text = """
    func.func @main(%a: !torch.vtensor<[1,1,1],f32>, %b: !torch.vtensor<[1,2,1],f32>) -> !torch.vtensor<[1,1,1],f32> {
      %0 = torch.aten.bmm %a, %b : !torch.vtensor<[1,1,1],f32>, !torch.vtensor<[1,2,1],f32> -> !torch.vtensor<[1,1,1],f32>
      return %0 : !torch.vtensor<[1,1,1],f32>
    }
    """
    found = _check(text)
    assert found is not None and found.op == "torch.aten.bmm" and found.refused
    assert "torch refuses" in found.describe()
    assert _check(text.replace("[1,2,1],f32>", "[1,?,1],f32>")) is None  # a dynamic dim: the sample may be to blame


def test_a_fold_that_hands_its_user_a_value_of_another_type_names_the_folded_op():
    """`where(c, x, x)` of a rank-0 `x` folds to `x`: `tanh` then takes a `[]` value and
    still declares `[1]`; the check names the fold's op, not only the user that tripped."""
    text = """
    func.func @main(%c: !torch.vtensor<[1],i1>, %x: !torch.vtensor<[],f32>) -> !torch.vtensor<[1],f32> {
      %0 = torch.aten.where.self %c, %x, %x : !torch.vtensor<[1],i1>, !torch.vtensor<[],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[1],f32>
      %1 = torch.aten.tanh %0 : !torch.vtensor<[1],f32> -> !torch.vtensor<[1],f32>
      return %1 : !torch.vtensor<[1],f32>
    }
    """
    broke = where_types_broke(text, toolchain("fx", "stablehlo").to_torch_backend)
    assert broke is not None, "torch-mlir's where.self fold keeps the broadcast right now: drop this test"
    assert broke.disagreement.op == "torch.aten.where.self"
    assert broke.disagreement.user is not None and broke.disagreement.user.op == "torch.aten.tanh"


def test_a_list_operand_with_a_dynamic_dim_is_not_refused():
    text = """
    func.func @main(%a: !torch.vtensor<[3,3],si32>, %b: !torch.vtensor<[4,?],si32>) -> !torch.vtensor<[7,3],si32> {
      %int0 = torch.constant.int 0
      %list = torch.prim.ListConstruct %a, %b : (!torch.vtensor<[3,3],si32>, !torch.vtensor<[4,?],si32>) -> !torch.list<vtensor>
      %0 = torch.aten.cat %list, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[7,3],si32>
      return %0 : !torch.vtensor<[7,3],si32>
    }
    """
    assert _check(text) is None  # the ? is 3 at run time for all the check knows
    found = _check(text.replace("[4,?]", "[4,5]"))
    assert found is not None and found.refused and "Sizes of tensors must match" in found.refused


def _replays(broke) -> str | None:
    """The signature the step shows alone on its input (None: it keeps the types there)."""
    from compiler.replay_runtime.replay import compile_signature

    assert first_disagreement(parse_module(broke.input_ir, new_context())) is None  # the input agrees
    pipeline = broke.replay_pipeline()
    return compile_signature(broke.input_ir, "torch-backend", pipeline, pipeline[-1])[0]


def test_a_fold_bug_gets_a_bundle_of_its_own_that_starts_where_the_types_agree(tmp_path):
    """The reducer's second bundle: the folding step's input, reduced while the step still
    hands `tanh` the unbroadcast value; its repro.py exits 1 in a fresh process."""
    from e2e.configs import load_config
    from e2e.framework.result import FAIL, Result
    from e2e.reducer.pair import FailingPair
    from e2e.reducer.strategies import TYPES_BUNDLE, _types_bundle

    text = """
    func.func @main(%c: !torch.vtensor<[1],i1>, %x: !torch.vtensor<[],f32>, %y: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[1],f32>, !torch.vtensor<[2],f32>) {
      %0 = torch.aten.where.self %c, %x, %x : !torch.vtensor<[1],i1>, !torch.vtensor<[],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[1],f32>
      %1 = torch.aten.tanh %0 : !torch.vtensor<[1],f32> -> !torch.vtensor<[1],f32>
      %2 = torch.aten.exp %1 : !torch.vtensor<[1],f32> -> !torch.vtensor<[1],f32>
      %3 = torch.aten.neg %y : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
      return %2, %3 : !torch.vtensor<[1],f32>, !torch.vtensor<[2],f32>
    }
    """
    broke = where_types_broke(text, toolchain("fx", "stablehlo").to_torch_backend)
    assert broke is not None, "torch-mlir's where.self fold keeps the broadcast right now: drop this test"
    assert _replays(broke) is not None
    pair = FailingPair(Result("Fold", "stablehlo", FAIL, stage="backend"), None, load_config("stablehlo"), tmp_path)
    checked = _types_bundle(pair, broke)
    assert checked.bundle_dir == tmp_path / "repro" / "Fold" / "stablehlo" / TYPES_BUNDLE, checked.bundle
    repro = (checked.bundle_dir / "repro.mlir").read_text()
    assert "torch.aten.where.self" in repro and "torch.aten.tanh" in repro
    assert "torch.aten.exp" not in repro and "torch.aten.neg" not in repro  # reduced
    readme = (checked.bundle_dir / "README.md").read_text()
    assert "leaves an op whose declared result type is not what torch computes" in readme


def test_an_op_not_given_a_dtype_yet_has_its_shapes_judged():
    """Inside torch-mlir's refinement an op's result is `unk` until the dtype passes run:
    its shapes are judged all the same, and static shapes torch refuses whatever the dtypes
    (tried as a float and as an integer) are a disagreement."""
    text = """
    func.func @main(%a: !torch.vtensor<[1,1,2],unk>, %b: !torch.vtensor<[1,1,{n}],f32>) -> !torch.vtensor<[1,1,2],unk> {{
      %0 = torch.aten.lt.Tensor %a, %b : !torch.vtensor<[1,1,2],unk>, !torch.vtensor<[1,1,{n}],f32> -> !torch.vtensor<[1,1,2],unk>
      return %0 : !torch.vtensor<[1,1,2],unk>
    }}
    """
    assert _check(text.format(n=2)) is None
    assert _check(text.format(n=1)) is None  # broadcasts
    found = _check(text.format(n=5))
    assert found is not None and found.op == "torch.aten.lt.Tensor" and found.refused


def test_a_fold_before_the_shapes_are_known_is_named_where_it_removed_the_op():
    """TorchScript's import leaves `!torch.tensor` values (their shapes only in the arguments'
    `torch.type_bound`): the check infers the unsized values' shapes from torch's meta kernels,
    so the conversion whose folding drops `where(c, x, x)`'s broadcast is named, with the op it
    removed, though no type the pass wrote is wrong yet (`avg_pool1d` then makes [1,1,2])."""
    text = """
    func.func @main(%x: !torch.tensor {torch.type_bound = !torch.vtensor<[1,1,1],f32>},
                    %c: !torch.tensor {torch.type_bound = !torch.vtensor<[4],i1>},
                    %y: !torch.tensor {torch.type_bound = !torch.vtensor<[1,1,5],f32>}) -> !torch.tensor {
      %false = torch.constant.bool false
      %true = torch.constant.bool true
      %int1 = torch.constant.int 1
      %int2 = torch.constant.int 2
      %0 = torch.aten.where.self %c, %x, %x : !torch.tensor, !torch.tensor, !torch.tensor -> !torch.tensor
      %kernel = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
      %stride = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
      %padding = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
      %1 = torch.aten.avg_pool1d %0, %kernel, %stride, %padding, %false, %true : !torch.tensor, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool -> !torch.tensor
      %2 = torch.aten.lt.Tensor %1, %y : !torch.tensor, !torch.tensor -> !torch.tensor
      return %2 : !torch.tensor
    }
    """
    assert _check(text) is None  # [1,1,4] pooled to [1,1,5]: lt broadcasts
    broke = where_types_broke(text, toolchain("torchscript", "linalg").to_torch_backend)
    assert broke is not None, "torch-mlir's where.self fold keeps the broadcast right now: drop this test"
    assert broke.pass_entry == "torch-adjust-calling-conventions"
    assert broke.disagreement.removed and broke.disagreement.op == "torch.aten.where.self"
    assert broke.disagreement.user.op == "torch.aten.lt.Tensor" and broke.disagreement.user.refused
    assert broke.disagreement.root() == "a fold or rewrite of torch.aten.where.self"  # as in the FX configs
    assert _replays(broke) is not None
