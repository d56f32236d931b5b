"""The packed matmul kernel of O2 programs (`compiler.replay_runtime.matmul`), compiled and run.

Without a fused multiply-add (the default target, `x86-64-v2`) each output element is
`C + a0*b0 + a1*b1 + ...` rounded after every multiply and every add, k in order: the
naive loop's bits, which `sequential` computes with torch's own f32 ops. Shapes are
picked to leave rows and columns past the last whole tile, k past one packed block,
and batch dims.
"""

from __future__ import annotations

import platform

import pytest
import torch

from compiler.compiled_module import compile_module
from compiler.replay_runtime import matmul, target
from compiler.stages import module_text, new_context, parse_module

x86_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="the named JIT targets are x86-64 ones")


class Matmuls(torch.nn.Module):
    def forward(self, *pairs):
        return tuple(torch.matmul(a, b) for a, b in zip(pairs[::2], pairs[1::2]))


# (A's shape, B's shape): x86-64-v2's tile is 4 x 8, a packed block 256 deep.
SHAPES = [
    ((13, 300), (300, 45)),  # 3 rows and 5 columns past the tiles, k over two blocks
    ((2, 3, 9, 17), (2, 3, 17, 16)),  # two batch dims
    ((1, 7), (7, 1)),  # no whole tile at all
    ((128, 64), (64, 768)),  # whole tiles only
]


def sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` as the loop computes it: from 0, one f32 multiply and one f32 add per k."""
    c = torch.zeros(*a.shape[:-1], b.shape[-1])
    for k in range(a.shape[-1]):
        c = c + a[..., :, k, None] * b[..., None, k, :]
    return c


def inputs(generator: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(shape, generator=generator) for pair in SHAPES for shape in pair]


def compile_counting_kernels(monkeypatch, values: list[torch.Tensor]):
    """`Matmuls` compiled at O2, and how many kernels the pass wrote into its program."""
    kernels = []
    real_pass = matmul.packed_matmul

    def counting(module):
        real_pass(module)
        kernels.append(module_text(module).count("func.func private @__e2e_matmul_"))

    monkeypatch.setattr(matmul, "packed_matmul", counting)
    return compile_module(Matmuls(), values, "linalg", opt_level=2), sum(kernels)


@x86_only
def test_without_fma_the_kernel_gives_the_loops_bits(monkeypatch):
    monkeypatch.setenv(target.ENV, "x86-64-v2")
    values = inputs(torch.Generator().manual_seed(0))
    compiled, kernels = compile_counting_kernels(monkeypatch, values)
    assert kernels == len(SHAPES)
    for result, a, b in zip(compiled(*values), values[::2], values[1::2]):
        assert torch.equal(result, sequential(a, b))


@x86_only
@pytest.mark.skipif(target.host_isa() < (256, True), reason="x86-64-v3 code needs AVX2 and FMA to run")
def test_with_fma_the_kernel_rounds_once_per_step(monkeypatch):
    monkeypatch.setenv(target.ENV, "x86-64-v3")  # 8 lanes: a 6 x 16 tile
    values = inputs(torch.Generator().manual_seed(1))
    compiled, kernels = compile_counting_kernels(monkeypatch, values)
    assert kernels == len(SHAPES)
    results = compiled(*values)
    for result, a, b in zip(results, values[::2], values[1::2]):
        torch.testing.assert_close(result, (a.double() @ b.double()).float(), rtol=1e-5, atol=1e-5)
    # One rounding per step, not two: over 300 steps some element differs from the loop's.
    assert not torch.equal(results[0], sequential(values[0], values[1]))


# The memrefs of `MEMREF_MODULE`'s function.
ARGUMENTS = {
    "%x": "memref<6x10xf32>",
    "%y": "memref<10x12xf32>",
    "%out": "memref<6x12xf32>",
    "%out2": "memref<6x12xf32>",
    "%i": "memref<6x10xi32>",
    "%j": "memref<10x12xi32>",
    "%iout": "memref<6x12xi32>",
    "%t": "memref<10x6xf32>",
    "%yt": "memref<10x12xf32, strided<[1, 10]>>",  # column-major
}


def reduction(
    a: str,
    b: str,
    out: str,
    multiply: str = "arith.mulf",
    add: str = "arith.addf",
    *,
    swapped=False,
    a_map: str = "(i, k)",
) -> str:
    """A `linalg.generic` with a matmul's loops: `out[i, j] = add(out, multiply(a[a_map], b[k, j]))`;
    `swapped`: each op's operands in the other order."""
    element = ARGUMENTS[out].rsplit("x", 1)[1].rstrip(">")  # memref<6x12xf32> -> f32
    product, total = ("%q, %p", "%m, %o") if swapped else ("%p, %q", "%o, %m")
    return f"""
  linalg.generic {{indexing_maps = [affine_map<(i, j, k) -> {a_map}>, affine_map<(i, j, k) -> (k, j)>,
      affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins({a}, {b} : {ARGUMENTS[a]}, {ARGUMENTS[b]}) outs({out} : {ARGUMENTS[out]}) {{
  ^bb0(%p: {element}, %q: {element}, %o: {element}):
    %m = {multiply} {product} : {element}
    %s = {add} {total} : {element}
    linalg.yield %s : {element}
  }}"""


MEMREF_MODULE = (
    f"func.func @main({', '.join(f'{name}: {type_}' for name, type_ in ARGUMENTS.items())}) {{"
    + reduction("%x", "%y", "%out", swapped=True)
    + reduction("%x", "%y", "%out2")
    + reduction("%i", "%j", "%iout", "arith.muli", "arith.addi")
    + reduction("%t", "%y", "%out", a_map="(k, i)")
    + reduction("%x", "%y", "%out", add="arith.maximumf")
    + reduction("%x", "%yt", "%out")
    + "\n  return\n}"
)


def test_only_f32_multiply_adds_become_kernels_and_a_shape_has_one(monkeypatch):
    monkeypatch.setenv(target.ENV, "x86-64-v2")
    module = parse_module(MEMREF_MODULE, new_context())
    matmul.packed_matmul(module)
    text = module_text(module)
    name = matmul.kernel_name(matmul.Matmul((), 6, 10, 12), 4, False)
    # The two f32 matmuls (operands in either order) call one kernel; the i32 one, the
    # one reading A down its columns (k, i), the max-plus one and the one whose B is
    # stored column-major (rows not contiguous: no vector loads) stay generics.
    assert text.count(f"call @{name}(") == 2
    assert text.count(f"func.func private @{name}(") == 1
    assert text.count("linalg.generic") == 4
    assert "arith.muli" in text and "arith.maximumf" in text
