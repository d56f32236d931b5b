"""The JIT compiles for a chosen target, not for the host CPU (`compiler.replay_runtime.target`).

The host's ISA must not leak into compiled code: an out-of-range `fptoui` or a shift past
the width is undefined, and what it returns is whatever instruction LLVM picked for the
CPU (`vcvttss2usi` on AVX-512 returns -1 for -3.0, a signed conversion on AVX2 -3). These
tests need no AVX-512 machine: they disassemble what the JIT produced for the pinned
target (with binutils' objdump) and check that every instruction is one an x86-64-v2 CPU
has (no VEX or EVEX encoding: no `v...` mnemonic, no ymm/zmm/mask register), over the
dtype programs of `test_portable_codegen` and the undefined-behaviour programs below.
On a host with AVX, the same program compiled for `host` does use such instructions:
what pinning removes is really there.
"""

from __future__ import annotations

import ctypes
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from torch_mlir.execution_engine import ExecutionEngine

from compiler.refbackend import lower_to_llvm
from compiler.replay_runtime import target
from compiler.stages import new_context, parse_module
from tests.test_portable_codegen import ELEMENTS, _program

# The targets are x86-64 ones; elsewhere the JIT keeps the host's choice (target.DEFAULT).
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the JIT targets here are x86-64 ones")
objdump = shutil.which("objdump")
needs_objdump = pytest.mark.skipif(objdump is None, reason="binutils' objdump is not installed")
# VEX/EVEX-encoded instructions: AVX and later (x86-64-v3 and up), never in an x86-64-v2 object.
_BEYOND_V2 = re.compile(r"^\s*[0-9a-f]+:\s+(v\w+|\S.*%[yz]mm\d+|\S.*%k[0-7]\b)", re.M)

UNDEFINED_OPS = """
func.func @main(%x: tensor<4xf32>, %a: tensor<4xi8>, %b: tensor<4xi8>) -> (tensor<4xi32>, tensor<4xi8>) {
  %e = tensor.empty() : tensor<4xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xi32>) {
  ^bb0(%v: f32, %o: i32):
    %c = arith.fptoui %v : f32 to i32
    linalg.yield %c : i32
  } -> tensor<4xi32>
  %e2 = tensor.empty() : tensor<4xi8>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %b : tensor<4xi8>, tensor<4xi8>)
      outs(%e2 : tensor<4xi8>) {
  ^bb0(%v: i8, %w: i8, %o: i8):
    %c = arith.shli %v, %w : i8
    linalg.yield %c : i8
  } -> tensor<4xi8>
  return %r, %s : tensor<4xi32>, tensor<4xi8>
}
"""


def _disassembly(text: str, jit: target.JitTarget, tmp_path: Path) -> str:
    """The JIT's object for `text` (linalg-on-tensors) compiled for `jit`, disassembled."""
    module = parse_module(text, new_context())
    lower_to_llvm(module)
    target.pin(module, jit)
    engine = ExecutionEngine(module, opt_level=0, shared_libs=[], enable_object_dump=True)
    engine.raw_lookup("_mlir_ciface_main")  # compile now (the dump holds what was compiled)
    path = tmp_path / "program.o"
    engine.dump_to_object_file(str(path))
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True).stdout


@needs_objdump
@pytest.mark.parametrize("element", ELEMENTS)
def test_every_dtype_program_compiles_to_x86_64_v2_instructions_only(element, tmp_path):
    disassembly = _disassembly(_program(element)[0], target.TARGETS["x86-64-v2"], tmp_path)
    assert "<main>:" in disassembly  # the program's own code is in the object
    beyond = _BEYOND_V2.findall(disassembly)
    assert not beyond, f"{element}: instructions beyond x86-64-v2: {beyond[:5]}"


@needs_objdump
def test_undefined_ops_compile_for_the_target_not_for_the_host(tmp_path):
    pinned = _disassembly(UNDEFINED_OPS, target.TARGETS["x86-64-v2"], tmp_path)
    assert "cvttss2si" in pinned and not _BEYOND_V2.findall(pinned)
    host = _disassembly(UNDEFINED_OPS, target.TARGETS["host"], tmp_path)
    if not _BEYOND_V2.findall(host):
        pytest.skip("this CPU (or emulator) has no AVX: its own code is x86-64-v2 code too")
    assert host != pinned


def test_the_default_target_is_a_fixed_baseline_and_the_environment_chooses(monkeypatch):
    monkeypatch.delenv(target.ENV, raising=False)
    assert target.jit_target().name == "x86-64-v2"
    monkeypatch.setenv(target.ENV, "host")
    assert target.jit_target().cpu is None
    monkeypatch.setenv(target.ENV, "pentium-pro")
    with pytest.raises(ValueError, match="unknown JIT target"):
        target.jit_target()


def test_a_compiled_program_reads_undefined_casts_as_the_target_does_on_any_host(monkeypatch):
    """fptoui of a negative float is poison; x86-64-v2 code converts through a signed 64-bit
    conversion, so -3.0 reads -3 on every host (host code on AVX-512 gives -1)."""
    from compiler.refbackend import compile_linalg

    monkeypatch.setenv(target.ENV, "x86-64-v2")
    program = compile_linalg(parse_module(UNDEFINED_OPS, new_context()), [torch.int32, torch.int8])
    casts, _ = program(
        torch.tensor([-3.0, 2.0, 7.5, -1.5]), torch.ones(4, dtype=torch.int8), torch.ones(4, dtype=torch.int8)
    )
    program.close()
    assert casts.tolist() == [-3, 2, 7, -1]


def test_iree_and_xla_follow_the_target(monkeypatch):
    from compiler.executors import iree, xla

    monkeypatch.setenv(target.ENV, "x86-64-v2")
    assert "--iree-llvmcpu-target-cpu=x86-64-v2" in iree.Iree().compile_flags()
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert xla.pin_isa() == "--xla_cpu_max_isa=AVX2"
    monkeypatch.setenv(target.ENV, "host")
    assert "--iree-llvmcpu-target-cpu=host" in iree.Iree().compile_flags()


def test_a_pinned_module_links_and_runs_through_the_packed_interface():
    text = "func.func @main(%x: f32) -> i32 attributes {llvm.emit_c_interface} {\n  %r = arith.fptosi %x : f32 to i32\n  return %r : i32\n}"
    module = parse_module(text, new_context())
    from torch_mlir import passmanager

    with module.context:
        passmanager.PassManager.parse(
            "builtin.module(convert-arith-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)"
        ).run(module.operation)
    target.pin(module, target.TARGETS["x86-64-v2"])
    engine = ExecutionEngine(module, opt_level=0, shared_libs=[])
    x, result = ctypes.c_float(-2.75), ctypes.c_int32(0)
    engine.invoke("main", ctypes.pointer(x), ctypes.pointer(result))
    assert result.value == -2
