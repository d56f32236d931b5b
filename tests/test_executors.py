"""Executors: the RefBackend and real runtimes behind one seam; runtime configs, their
verdicts, native reproducers, and the capture-discrepancy check."""

from __future__ import annotations

import subprocess

import pytest
import torch

from compiler.backend_compile import compile_torch_backend_ir, torch_backend_ir
from compiler.executors import load_executor, replay
from compiler.frontends.fx import fx_import
from compiler.stages import Snapshots, StageError
from compiler.toolchain import toolchain
from e2e.configs import load_config
from e2e.framework.prepared import prepare
from e2e.framework.registry import Test, annotate_args
from e2e.framework.result import NotApplicable, Result
from e2e.framework.runner import attempt_pair
from e2e.framework.signature import mismatch_signature, stage_signature
from e2e.reducer.case import compile_signature

RUNTIMES = [("tosa", "tosa-ref"), ("stablehlo", "xla"), ("stablehlo", "interp"), ("linalg", "iree"), ("torch", "iree")]


def needs(executor: str, backend: str = "linalg") -> None:
    missing = toolchain("fx", backend, executor).executor.missing()
    if missing:
        pytest.skip(f"{executor} not installed: {missing}")


def judged(test: Test, config: str, reports_dir, shape_mode: str = "annotated", prepared=None) -> Result:
    """The pair's Result as the runner makes it (compile, run, judge, explain), in this process."""
    prepared = prepared or prepare(test)
    prepared.shape_mode = shape_mode
    attempted = attempt_pair(prepared, load_config(config), reports_dir)
    assert isinstance(attempted, tuple), attempted  # not a framework error
    return attempted[0]


def ir_dir(reports_dir, test: str, config: str):
    return reports_dir / "ir" / test / config


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, i):
        return torch.relu(self.linear(x))[:, :2] * 2 + 1, i + 1


@pytest.mark.parametrize("backend, executor", RUNTIMES)
def test_a_runtime_runs_what_torch_mlir_produced_like_torch(backend, executor):
    needs(executor, backend)
    module, x, i = Small(), torch.rand(2, 4), torch.arange(6).reshape(2, 3)
    imported = fx_import(module, [x, i])
    torch_ir = imported.raw_ir if backend == "torch" else torch_backend_ir(imported.raw_ir)
    program = compile_torch_backend_ir(torch_ir, backend, executor=executor)
    try:
        y, j = program(x, i)
    finally:
        program.close()
    expected_y, expected_j = module(x, i)
    torch.testing.assert_close(y, expected_y, rtol=1e-5, atol=1e-6)
    assert j.dtype == torch.int64 and torch.equal(j, expected_j)


def test_a_runtime_that_is_not_installed_skips_with_its_install_line(monkeypatch, tmp_path):
    monkeypatch.setenv("E2E_TOSA_TOOLS", str(tmp_path))  # no binaries there
    prepared = prepare(Test("Small", Small, lambda m, tu: m.forward(tu.rand(2, 4), torch.arange(6).reshape(2, 3))))
    with pytest.raises(NotApplicable, match=r"python -m compiler.executors.tosa_ref --install"):
        load_config("tosa@tosa-ref").compile(prepared, Snapshots())


def test_the_fx_configs_compile_what_their_toolchain_says():
    linalg = toolchain("fx", "linalg")
    assert "backend-legal-ops=aten.adaptive_max_pool2d" in linalg.stages["torch-backend"][1]
    assert linalg.stages["lower"][-1] == "reconcile-unrealized-casts"  # ends in LLVM: the RefBackend
    assert (
        toolchain("ltc", "linalg").stages["torch-backend"][1]
        == "python:compiler.replay_runtime.passes:erase_dead_allocations"
    )
    iree = load_config("linalg@iree").toolchain()
    assert iree.stages["backend"][-1] == replay.entry("iree", "linalg")
    assert replay.parse(iree.stages["lower"][-1]) == ("iree", "linalg", False)


class MmInt64(torch.nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)


def mm_int64(module, tu):
    module.forward(tu.randint(3, 4, low=-5, high=5), tu.randint(4, 5, low=-5, high=5))


def test_a_runtime_only_failure_says_the_refbackend_twin_matches_torch_and_writes_a_native_bundle(tmp_path):
    needs("tosa-ref", "tosa")
    result = judged(Test("MmInt64", MmInt64, mm_int64), "tosa@tosa-ref", tmp_path)  # no int64 matmul in the model
    assert (result.stage, result.verdict) == ("execute", "runtime-side"), result
    assert result.failing_pass == replay.entry("tosa-ref", "tosa", run=True)
    assert result.verdict_reason.startswith(
        "verdict: runtime-side (the TOSA reference model): the RefBackend twin `tosa`"
    )
    native = ir_dir(tmp_path, "MmInt64", "tosa@tosa-ref") / "native"
    assert any(note.endswith(str(native / "README.md")) for note in result.notes), result.notes
    run = subprocess.run(["sh", str(native / "run.sh")], capture_output=True, text=True)
    assert run.returncode != 0 and "SUBGRAPH_ERROR_IF" in run.stdout + run.stderr
    # The reducer replays the failure on the runtime, from the IR the runtime was given.
    entry = result.failing_pass
    given = open(result.ir_path).read()
    assert compile_signature(given, "execute", [entry], entry)[0] == result.signature
    assert result.signature == stage_signature("execute", result.error.splitlines()[0], entry)


def needs_onnx() -> None:
    from compiler.frontends.onnx import missing_packages

    if missing := missing_packages():
        pytest.skip(f"the onnx packages are not installed: {missing}")


def test_onnx_at_iree_hands_iree_the_imported_onnx_model_and_runs_it_like_torch(tmp_path):
    needs("iree", "torch")
    needs_onnx()
    config = load_config("onnx@iree")
    chain = config.toolchain()
    assert chain.executor_input == "onnx" and chain.stages["lower"] == (replay.entry("iree", "onnx"),)
    prepared = prepare(Test("Small", Small, lambda m, tu: m.forward(tu.rand(2, 4), torch.arange(6).reshape(2, 3))))
    compiled = config.compile(prepared, Snapshots(tmp_path))
    try:
        trace = config.run(compiled, prepared.golden)
    finally:
        compiled.close()
    (y, j), (expected_y, expected_j) = trace[0].outputs, prepared.golden[0].outputs
    torch.testing.assert_close(y, expected_y, rtol=1e-5, atol=1e-6)
    assert torch.equal(j, expected_j)
    (given,) = tmp_path.glob("*lower.mlir")  # what the lower stage handed IREE
    assert '"onnx.Gemm"' in given.read_text()  # IREE converts the ONNX ops itself


class Matmul4dBroadcast(torch.nn.Module):
    @annotate_args([None, ([-1, -1, -1, -1], torch.float32, True), ([-1, -1, -1, -1], torch.float32, True)])
    def forward(self, a, b):
        return torch.matmul(a, b)


def test_onnx_at_iree_judges_a_model_both_torch_mlir_and_iree_convert_wrong(tmp_path):
    # torch-mlir 20261001's onnx.MatMul conversion with dynamic batch dims that broadcast
    # (2x1 against 1x3): IREE returns the unbroadcast shape, the RefBackend garbage.
    needs("iree", "torch")
    needs_onnx()
    test = Test(
        "Matmul4dBroadcast", Matmul4dBroadcast, lambda m, tu: m.forward(tu.rand(2, 1, 3, 4), tu.rand(1, 3, 4, 5))
    )
    result = judged(test, "onnx@iree", tmp_path)
    assert (result.stage, result.signature, result.verdict) == ("compare", mismatch_signature("shape"), "both wrong")
    assert result.verdict_reason.startswith("verdict: both wrong: IREE gives wrong results (shape mismatch)")
    assert "convert-torch-onnx-to-torch" in result.verdict_reason
    native = ir_dir(tmp_path, "Matmul4dBroadcast", "onnx@iree") / "native"
    assert "--iree-input-type=onnx" in (native / "README.md").read_text()
    assert any(note.startswith("onnxruntime oracle: ") for note in result.notes), result.notes


def test_the_refbackend_compiles_through_the_same_seam():
    executor = load_executor("refbackend", input="linalg")
    assert executor.missing() is None and "linalg" in executor.accepts


class PaddedEncoder(torch.nn.Module):
    """Eval mode with a padding mask: eager takes the nested-tensor fast path (zeros at padding)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=1)
        self.eval()

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


def padded_batch(module, tu):
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[0, 3:] = True
    module.forward(tu.rand(2, 5, 16), padding)


def test_a_captured_program_that_disagrees_with_eager_is_a_capture_discrepancy(tmp_path):
    result = judged(Test("PaddedEncoder", PaddedEncoder, padded_batch), "linalg", tmp_path, "static")
    assert (result.outcome, result.stage) == ("fail", "capture"), result
    assert result.error.startswith("capture discrepancy (values)") and result.signature.stage == "capture"


def unpadded_then_padded(module, tu):
    x = tu.rand(2, 5, 16)
    module.forward(x, torch.zeros(2, 5, dtype=torch.bool))  # no padding: eager and the capture agree
    padded_batch(module, tu)


def test_a_capture_discrepancy_on_a_later_call_is_found_at_that_call(tmp_path):
    """The capture check starts at the call the runner's comparison found mismatching."""
    result = judged(Test("PaddedEncoderTwice", PaddedEncoder, unpadded_then_padded), "linalg", tmp_path, "static")
    assert (result.outcome, result.stage) == ("fail", "capture"), result
    assert result.error.startswith("capture discrepancy (values)") and "trace item #1 (forward)" in result.error


def test_an_iree_compile_error_is_signed_by_its_first_error_not_by_the_tool_wrapper():
    needs("iree", "torch")
    module, a = torch.nn.Module(), torch.arange(6, dtype=torch.int32).reshape(2, 3)
    module.forward = lambda x, y: torch.gcd(x, y)  # IREE's torch input path has no aten.gcd
    with pytest.raises(StageError) as raised:
        compile_torch_backend_ir(fx_import(module, [a, a]).raw_ir, "torch", executor="iree")
    assert raised.value.stage == "lower"
    first = raised.value.message.splitlines()[0]
    assert first.startswith("iree-compile: error: failed to legalize operation 'torch.operator'"), first
    assert "torch.aten.gcd" in first and "Error invoking" not in raised.value.message


def test_an_iree_compile_crash_names_its_signal_and_pass():
    from compiler.executors.iree import compile_error

    crashed = (
        "Error invoking IREE compiler tool iree-compile\nError code: -11\nDiagnostics:\n"
        "Please report issues to https://github.com/iree-org/iree/issues and include the crash backtrace.\n"
        " #4 0x00007fd2eff94f70 mlir::iree_compiler::DispatchCreation::decideFusableLinalgOps(mlir::Region&) F.cpp:0:0\n"
        " #5 0x00007fd2eff93b53 mlir::iree_compiler::DispatchCreation::(anonymous namespace)::"
        "FormDispatchRegionsPass::runOnOperation() FormDispatchRegions.cpp:0:0\n"
        " #6 0x00007fd2ee709731 mlir::detail::OpToOpPassAdaptor::run(mlir::Pass*) Pass.cpp:0:0\n\n\n"
        "Invoked with:\n iree-compile - --iree-input-type=auto\n"
    )
    assert compile_error(crashed).splitlines()[0] == "crashed (signal 11) in FormDispatchRegionsPass"


def test_a_capture_taken_over_from_an_earlier_host_is_checked_all_the_same(tmp_path):
    """A host that retired hands its captures to the next one without their ExportedPrograms
    (they do not cross processes); the capture check captures again, so the pair's verdict
    is `capture` whether or not an earlier config of the test ran first."""
    import pickle

    config = load_config("linalg")
    prepared = prepare(Test("PaddedEncoder", PaddedEncoder, padded_batch))
    prepared.shape_mode = "static"
    config.compile(prepared, Snapshots()).close()  # an earlier config's host captured it
    taken_over = prepare(Test("PaddedEncoder", PaddedEncoder, padded_batch))
    taken_over.shape_mode = "static"
    taken_over.shared.update(pickle.loads(pickle.dumps(prepared.new_shared)))
    compiled = config.compile(taken_over, Snapshots())
    assert taken_over.reused and all(getattr(i, "exported", None) is None for i in compiled.imported.values())
    compiled.close()
    result = judged(None, "linalg", tmp_path, "static", prepared=taken_over)
    assert (result.outcome, result.stage) == ("fail", "capture"), result
    assert result.error.startswith("capture discrepancy")


def test_a_pairs_verdict_and_twin_are_result_fields(tmp_path):
    needs("tosa-ref", "tosa")
    result = judged(Test("MmInt64", MmInt64, mm_int64), "tosa@tosa-ref", tmp_path)
    assert (result.stage, result.twin, result.verdict) == ("execute", "tosa", "runtime-side"), result
    # Notes are plain text: xdist's channel carries only built-in types.
    assert all(type(note) is str for note in result.notes) and result.verdict_reason in result.notes
    small = Test("Small", Small, lambda m, tu: m.forward(tu.rand(2, 4), torch.arange(6).reshape(2, 3)))
    passed = judged(small, "linalg", tmp_path)
    assert (passed.outcome, passed.twin, passed.verdict) == ("pass", None, None)


UNSIGNED = """func.func @main(%a: tensor<3xui16>, %b: tensor<3xui32>, %c: tensor<3xui64>) ->
    (tensor<3xui16>, tensor<3xui32>, tensor<3xui64>) {
  %0 = stablehlo.add %a, %a : tensor<3xui16>
  %1 = stablehlo.add %b, %b : tensor<3xui32>
  %two = stablehlo.constant dense<2> : tensor<3xui64>
  %2 = stablehlo.divide %c, %two : tensor<3xui64>
  return %0, %1, %2 : tensor<3xui16>, tensor<3xui32>, tensor<3xui64>
}"""


@pytest.mark.parametrize("executor", ["refbackend", "interp", "xla", "iree"])
def test_ui16_ui32_and_ui64_tensors_go_in_and_come_back_unsigned(executor):
    # torch-mlir's FX importer has no uint16/32/64; they reach an executor from StableHLO
    # (the testdata suite, the ONNX models IREE takes). Values past the signed range, and
    # a division that is wrong if done signed (2**63 + 5 and 2**64 - 1 read signed are negative).
    from compiler.stages import new_context, parse_module

    needs(executor, "stablehlo")
    program = load_executor(executor, input="stablehlo").program_for(
        parse_module(UNSIGNED, new_context()), [torch.uint16, torch.uint32, torch.uint64], Snapshots()
    )
    a = torch.tensor([40000, 7, 65535], dtype=torch.uint16)
    b = torch.tensor([3_000_000_000, 7, 1], dtype=torch.uint32)
    c = torch.tensor([2**63 + 5, 7, 2**64 - 1], dtype=torch.uint64)
    try:
        x, y, z = program(a, b, c)
    finally:
        program.close()
    assert (x.dtype, y.dtype, z.dtype) == (torch.uint16, torch.uint32, torch.uint64)
    assert x.tolist() == [14464, 14, 65534] and y.tolist() == [1705032704, 14, 2]
    assert z.tolist() == [2**62 + 2, 3, 2**63 - 1]


# --- StableHLO's reference interpreter (stablehlo@interp) ---------------------------------


def interp_program(text: str, result_dtypes):
    """A hand-written StableHLO program, compiled for the interpreter as the suite compiles one."""
    from compiler.stages import new_context, parse_module

    needs("interp", "stablehlo")
    return load_executor("interp").compile(parse_module(text, new_context()), result_dtypes, Snapshots())


BF16_AND_COMPLEX = """func.func @main(%a: tensor<4xbf16>, %b: tensor<3xcomplex<f32>>, %c: tensor<2xui8>) ->
    (tensor<4xbf16>, tensor<3xcomplex<f32>>, tensor<2xui8>) {
  %0 = stablehlo.negate %a : tensor<4xbf16>
  %1 = stablehlo.negate %b : tensor<3xcomplex<f32>>
  %2 = stablehlo.add %c, %c : tensor<2xui8>
  return %0, %1, %2 : tensor<4xbf16>, tensor<3xcomplex<f32>>, tensor<2xui8>
}"""


def test_the_interpreter_passes_bf16_complex_and_unsigned_tensors_bit_exactly(tmp_path):
    # Its Python binding reads neither bf16 nor complex results back (a complex one ends the
    # process): @main is wrapped to return their bits and parts.
    program = interp_program(BF16_AND_COMPLEX, [torch.bfloat16, torch.complex64, torch.uint8])
    a = torch.tensor([1.5, -0.0, float("inf"), 3.0e38], dtype=torch.bfloat16)
    b = torch.tensor([complex(1, 2), complex(float("inf"), 0), complex(0, float("nan"))], dtype=torch.complex64)
    c = torch.tensor([200, 7], dtype=torch.uint8)
    try:
        x, y, z = program(a, b, c)
        assert "@main_as_emitted" in program.text and "stablehlo.bitcast_convert" in program.text
        command = program.write_native(tmp_path, [a, b, c])  # the bundle's script reads them the same way
    finally:
        program.close()
    assert x.dtype == torch.bfloat16 and torch.equal(x.view(torch.int16), (-a).view(torch.int16))
    assert y.dtype == torch.complex64 and torch.equal(
        torch.view_as_real(y).view(torch.int32), torch.view_as_real(-b).view(torch.int32)
    )
    assert z.dtype == torch.uint8 and z.tolist() == [144, 14]  # wraps, unsigned
    run = subprocess.run(command.split(), cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    import numpy as np

    assert np.array_equal(np.load(tmp_path / "output_1.npy"), (-b).numpy(), equal_nan=True)
    assert np.load(tmp_path / "output_0.npy").tolist()[:2] == [-1.5, 0.0]


def test_an_element_type_the_interpreter_executor_does_not_pass_fails_in_stage_lower_naming_it():
    text = """func.func @main(%a: tensor<3xf32>) -> tensor<3xf8E4M3B11FNUZ> {
      %0 = stablehlo.convert %a : (tensor<3xf32>) -> tensor<3xf8E4M3B11FNUZ>
      return %0 : tensor<3xf8E4M3B11FNUZ>
    }"""
    with pytest.raises(StageError) as raised:
        interp_program(text, [torch.float32])
    assert raised.value.stage == "lower" and str(raised.value).startswith("[lower] the StableHLO interpreter")
    assert "result 0 has element type f8E4M3B11FNUZ, which this executor does not pass" in raised.value.message


def test_an_op_the_interpreter_lacks_fails_in_stage_lower_instead_of_aborting_the_process():
    text = """func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.dot %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    with pytest.raises(StageError) as raised:
        interp_program(text, [torch.float32])
    assert raised.value.stage == "lower"
    assert "has no implementation of stablehlo.dot: it would abort the process" in raised.value.message


def test_the_ops_the_interpreter_lacks_are_ops_of_jaxlibs_stablehlo():
    needs("interp", "stablehlo")
    from jaxlib.mlir.dialects import _stablehlo_ops_gen

    from compiler.executors.interp import LACKING

    registered = {getattr(c, "OPERATION_NAME", None) for c in vars(_stablehlo_ops_gen).values()}
    assert LACKING <= registered, LACKING - registered


class TopkSmallest(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x, 3, largest=False).values


class FloorDivideInt8(torch.nn.Module):
    def forward(self, a, b):
        return torch.floor_divide(a, b)


def run_on_interp(test: Test, tmp_path) -> Result:
    """A test's Result on stablehlo@interp."""
    needs("interp", "stablehlo")
    return judged(test, "stablehlo@interp", tmp_path)


def test_the_interpreter_runs_what_the_refbackend_twin_cannot_lower_and_the_verdict_looks_below_stablehlo(tmp_path):
    # The twin's stablehlo-legalize-to-linalg leaves a sort that one-shot-bufferize refuses.
    result = run_on_interp(Test("TopkSmallest", TopkSmallest, lambda m, tu: m.forward(tu.rand(4, 6))), tmp_path)
    assert (result.outcome, result.verdict) == ("pass", "RefBackend-side"), result
    verdict = result.verdict_reason
    assert verdict.startswith(
        "verdict: RefBackend-side: the StableHLO interpreter runs the same stablehlo IR and matches torch; "
        "the RefBackend twin `stablehlo` fails in stage lower"
    )
    assert "look at stablehlo -> linalg -> LLVM or the RefBackend, not at torch -> stablehlo" in verdict


def test_a_wrong_interpreter_result_says_the_program_is_wrong_by_the_spec(tmp_path):
    # torch-mlir floor-divides int8 in f64 and converts 128.0 back to i8, out of range: the
    # interpreter saturates (127); the twin's conversion wraps, as torch's integer division does.
    def invoke(module, tu):
        module.forward(torch.tensor([-128, 7, -7], dtype=torch.int8), torch.tensor([-1, 2, 2], dtype=torch.int8))

    result = run_on_interp(Test("FloorDivideInt8", FloorDivideInt8, invoke), tmp_path)
    assert (result.stage, result.verdict) == ("compare", "runtime-side"), result
    verdict = result.verdict_reason
    assert verdict.startswith("verdict: runtime-side (the StableHLO interpreter): the RefBackend twin `stablehlo`")
    assert "by the spec, torch -> stablehlo emitted a wrong program" in verdict


# The raw IR FxImporter wrote for `F.pad(x, ..., mode="reflect")` with dynamic dims: an int
# where a tensor is wanted. It does not verify, so MLIR printed it in generic form.
_INVALID_RAW_IR = """
"builtin.module"() ({
  "func.func"() <{function_type = (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>, sym_name = "main"}> ({
  ^bb0(%arg0: !torch.vtensor<[2],f32>):
    %0 = "torch.constant.int"() <{value = 1 : i64}> : () -> !torch.int
    %1 = "torch.aten.sub.Tensor"(%0, %arg0, %0) : (!torch.int, !torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
    "func.return"(%1) : (!torch.vtensor<[2],f32>) -> ()
  }) : () -> ()
}) : () -> ()
"""


def test_a_runtime_given_raw_torch_ir_that_does_not_verify_blames_the_import():
    from compiler.backend_compile import compile_backend_ir

    with pytest.raises(StageError) as raised:
        compile_backend_ir(_INVALID_RAW_IR, toolchain("fx", "torch", "iree"))
    assert raised.value.stage == "import"
    assert "the imported module does not verify" in str(raised.value)
    assert "'torch.aten.sub.Tensor' op operand #0 must be Any Torch tensor type" in str(raised.value)
