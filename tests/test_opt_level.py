"""The RefBackend's opt-level policy: O0 for small programs, O2 for a million elements; the
JIT's code generation at the program's level."""

import torch
from torch_mlir.execution_engine import ExecutionEngine

from compiler.compiled_module import compile_module
from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.refbackend import LARGE_TENSOR_ELEMENTS, largest_tensor_elements, opt_level_for
from compiler.replay_runtime import codegen
from compiler.replay_runtime.codegen import codegen_level
from compiler.stages import parse_module


def test_largest_tensor_counts_static_shapes_only():
    text = "!torch.vtensor<[3,4],f32> !torch.vtensor<[],f32> !torch.vtensor<[-1,500],f32> tensor<10x20xf32> tensor<?x9xf32>"
    assert largest_tensor_elements(text) == 200


class Sample(torch.nn.Module):
    def __init__(self, samples: int):
        super().__init__()
        self.samples = samples

    def forward(self, x):
        return torch.zeros(self.samples).add(x).sum()


def test_a_million_element_program_is_jitted_at_o2():
    x = torch.tensor(1.0)
    small, _ = fx_to_torch_backend_ir(Sample(1000), [x])
    large, _ = fx_to_torch_backend_ir(Sample(LARGE_TENSOR_ELEMENTS), [x])
    assert (opt_level_for(small), opt_level_for(large)) == (0, 2)
    assert compile_module(Sample(LARGE_TENSOR_ELEMENTS), [x])(x).item() == LARGE_TENSOR_ELEMENTS


# A loop in LLVM's dialect: what code generation makes of it differs by level.
SUM_OF_SQUARES = """
llvm.func @sum_of_squares(%n: i64) -> i64 {
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  llvm.br ^loop(%zero, %zero : i64, i64)
^loop(%i: i64, %acc: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^body, ^done
^body:
  %square = llvm.mul %i, %i : i64
  %next_acc = llvm.add %acc, %square : i64
  %next_i = llvm.add %i, %one : i64
  llvm.br ^loop(%next_i, %next_acc : i64, i64)
^done:
  llvm.return %acc : i64
}
"""


def _object_code(level: int, path) -> bytes:
    """SUM_OF_SQUARES JIT-compiled (IR passes at O0) under `level`'s code generation, as an object file."""
    module = parse_module(SUM_OF_SQUARES)
    with codegen_level(level):
        engine = ExecutionEngine(module, opt_level=0, shared_libs=[], enable_object_dump=True)
        assert engine.raw_lookup("sum_of_squares")  # compiled here
    engine.dump_to_object_file(str(path))
    return path.read_bytes()


def test_a_program_at_o0_is_compiled_by_o0s_code_generator(tmp_path):
    """MLIR's C API compiles every engine with the default level's code generator; the
    options `codegen_level(0)` gives LLVM reach it: other machine code than the default
    level makes of the same LLVM IR, the same code each time."""
    at_o0 = _object_code(0, tmp_path / "o0.o")
    assert at_o0 != _object_code(2, tmp_path / "default.o")
    assert at_o0 == _object_code(0, tmp_path / "o0-again.o")


def test_code_generation_levels_nest_and_programs_at_both_give_torchs_results():
    with codegen_level(0):
        with codegen_level(2):
            assert codegen.current_level() == 2
        assert codegen.current_level() == 0
    assert codegen.current_level() == 2  # the default level's options, as LLVM has none given
    x = torch.tensor(1.0)
    for level in (0, 2, 0):
        assert compile_module(Sample(1000), [x], opt_level=level)(x).item() == 1000
