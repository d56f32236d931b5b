"""A crash's signature says which crash: an assert's message, the innermost native frames."""

import shutil

import pytest

from compiler.replay_runtime.crash import frame_name, last_words, native_frames
from e2e.configs import load_config
from e2e.framework.signature import Signature, crash_signature
from e2e.reducer.case import CRASH, Case, observe
from e2e.reducer.localize import stage_pipelines

# LLVM's stack dump as the bindings' library prints it on SIGSEGV (torch-mlir 20261001,
# `torch.aten.any.dims` folded on an unranked operand), shortened.
DUMP = """\
some earlier output
PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.
Stack dump:
0.\tProgram arguments: python
 #0 0x00007f1b546f5eea llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) (/x/libTorchMLIRAggregateCAPI.so+0xaf5eea)
 #1 0x00007f1b546f2e66 SignalHandler(int, siginfo_t*, void*) Signals.cpp:0:0
 #2 0x00007f1b5d85a050 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)
 #3 0x00007f1b561d6e83 mlir::torch::Torch::ValueTensorType::toBuiltinTensor() const (/x/lib.so+0x25d6e83)
 #4 0x00007f1b5612e719 mlir::torch::Torch::AtenAnyDimsOp::fold(mlir::torch::Torch::AtenAnyDimsOpGenericAdaptor<llvm::ArrayRef<mlir::Attribute> >) (/x/lib.so+0x252e719)
 #5 0x00007f1b55ea25f9 (anonymous namespace)::OperationLegalizer::legalizeWithFold(mlir::Operation*) DialectConversion.cpp:0:0
 #6 0x00007f1b5d17c70b (/x/_mlir.cpython-311-x86_64-linux-gnu.so+0x2a70b)
Fatal Python error: Segmentation fault
"""


def test_the_innermost_named_frames_are_read_without_parameters_or_the_handlers_own():
    assert frame_name("mlir::A::fold(int, char) const (/x.so+0x1)") == "mlir::A::fold"
    assert frame_name("Model<mlir::B>::foldHook(mlir::Operation*) (/x.so+0x1)") == "Model<mlir::B>::foldHook"
    assert frame_name("(/lib/libc.so.6+0x3c050)") is None
    assert native_frames(DUMP) == [
        "mlir::torch::Torch::ValueTensorType::toBuiltinTensor",
        "mlir::torch::Torch::AtenAnyDimsOp::fold",
        "OperationLegalizer::legalizeWithFold",
    ]
    assert last_words(DUMP) == "some earlier output"
    signature = crash_signature("torch-backend", DUMP, "killed by SIGSEGV")
    assert signature.message.startswith("Fatal Python error: Segmentation fault in mlir::torch::Torch::ValueTensorType")
    # Words before a segfault are not its crash state: only an abort's are (a failed assert's message).
    assert "some earlier output" not in signature.message


def test_an_xfail_entry_recorded_without_the_crash_state_still_holds():
    recorded = Signature.parse("crash | execute | Fatal Python error: Aborted")
    observed = crash_signature("execute", "mismatched size\nFatal Python error: Aborted\n", "killed by SIGABRT")
    assert observed.message == "Fatal Python error: Aborted: mismatched size"
    assert recorded.covers(observed) and recorded != observed


def _asserting(message: str) -> str:
    """Lowered IR that checks its input's size (as torch-mlir's broadcasts do) and aborts with `message`."""
    return f"""
func.func @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %dim = tensor.dim %arg0, %c0 : tensor<?xf32>
  %ok = arith.cmpi eq, %dim, %c3 : index
  cf.assert %ok, "{message}"
  return %arg0 : tensor<?xf32>
}}
"""


def test_two_aborts_for_different_reasons_are_two_signatures():
    # The made-up inputs (3 per dim) pass `dim == 3`; a 4 fails it.
    execute = stage_pipelines(load_config("linalg"))["execute"]
    case = Case(CRASH, "execute", execute, Signature("crash", "execute"))
    broadcast = observe(
        case, _asserting("mismatched size for broadcast").replace("%c3 = arith.constant 3", "%c3 = arith.constant 4")
    )
    contract = observe(
        case,
        _asserting("mismatching contracting dimension").replace("%c3 = arith.constant 3", "%c3 = arith.constant 4"),
    )
    assert broadcast is not None and contract is not None
    assert broadcast.message.endswith("Aborted: mismatched size for broadcast"), broadcast
    assert contract.message.endswith("Aborted: mismatching contracting dimension"), contract
    assert broadcast != contract  # a reducer's candidate that aborts for the other reason is not interesting
    assert observe(case, _asserting("mismatched size for broadcast")) is None  # the check passes: no crash


# torch-mlir 20261001 folds `aten.any.dims` of an unranked operand through a null type and
# segfaults, in torch-adjust-calling-conventions (the JIT frontends' first torch-backend pass).
ANY_DIMS = """
func.func @main(%arg0: !torch.tensor {torch.type_bound = !torch.vtensor<[1,1],f32>}) -> !torch.tensor {
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %0 = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %1 = torch.aten.any.dims %arg0, %0, %false : !torch.tensor, !torch.list<int>, !torch.bool -> !torch.tensor
  return %1 : !torch.tensor
}
"""


@pytest.mark.skipif(shutil.which("llvm-symbolizer") is None, reason="needs llvm-symbolizer (apt install llvm)")
def test_a_pass_crash_is_signed_by_its_own_native_frames():
    case = Case(CRASH, "torch-backend", ["torch-adjust-calling-conventions"], Signature("crash", "torch-backend"))
    signature = observe(case, ANY_DIMS)
    assert signature is not None and signature.stage == "crash", signature
    assert "Segmentation fault in " in signature.message
    assert "AtenAnyDimsOp::fold" in signature.message, signature


def test_a_replay_without_named_frames_still_shows_the_crash():
    # A maintainer's machine without llvm-symbolizer prints the stack unnamed.
    recorded = Signature.parse("crash | backend | Fatal Python error: Aborted: x in a::f < b::g")
    assert recorded.shows(Signature.parse("crash | backend | Fatal Python error: Aborted: x"))
    assert not recorded.shows(Signature.parse("crash | backend | Fatal Python error: Aborted: y"))
    assert not recorded.shows(Signature.parse("crash | backend | Fatal Python error: Aborted: x in c::h"))
    assert not recorded.shows(Signature.parse("crash | lower | Fatal Python error: Aborted: x"))
