"""The packed matmul kernel of O2 programs against the loops it replaces and PyTorch's own.

    python benchmarks/matmul.py                          # GPT-2 small's matmuls, each target
    python benchmarks/matmul.py --shape 128,768,3072 --target host

For each M x K @ K x N f32 matmul (default: GPT-2 small's four at sequence 128 and its
attention's batched ones) and each JIT target this CPU can run, one program lowered at
O2 twice: with the kernel (`compiler.replay_runtime.matmul`, as the `lower` stage runs
it) and without (the loops of `convert-linalg-to-loops`, vectorized by LLVM), and
PyTorch's `a @ b` at one thread (MKL). Best of `--repeats` calls each, interleaved, so
all three see the same load; GFLOP/s and the ratios in one run. Calls go through the
RefBackend's marshalling, so small shapes include its fixed cost.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from compiler.refbackend import PACKED_MATMUL, _load, lower_pipeline  # noqa: E402
from compiler.replay_runtime import target  # noqa: E402
from compiler.stages import new_context, parse_module, run_stage  # noqa: E402

# GPT-2 small at sequence 128: qkv, attention out, MLP up, MLP down; then q @ k^T and p @ v per head.
GPT2_SHAPES = ["128,768,2304", "128,768,768", "128,768,3072", "128,3072,768", "12x128,64,128", "12x128,128,64"]


def program(batch: list[int], m: int, k: int, n: int, with_kernel: bool):
    lead = "".join(f"{d}x" for d in batch)
    maps = ", ".join(f"d{i}" for i in range(len(batch)))
    prefix = f"{maps}, " if batch else ""
    dims = f"({prefix}i, j, r)"
    text = f"""
    func.func @main(%a: tensor<{lead}{m}x{k}xf32>, %b: tensor<{lead}{k}x{n}xf32>) -> tensor<{lead}{m}x{n}xf32> {{
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<{lead}{m}x{n}xf32>
      %c = linalg.fill ins(%z : f32) outs(%e : tensor<{lead}{m}x{n}xf32>) -> tensor<{lead}{m}x{n}xf32>
      %r = linalg.generic {{indexing_maps = [affine_map<{dims} -> ({prefix}i, r)>, affine_map<{dims} -> ({prefix}r, j)>,
          affine_map<{dims} -> ({prefix}i, j)>], iterator_types = [{'"parallel", ' * len(batch)}"parallel", "parallel", "reduction"]}}
          ins(%a, %b : tensor<{lead}{m}x{k}xf32>, tensor<{lead}{k}x{n}xf32>) outs(%c : tensor<{lead}{m}x{n}xf32>) {{
      ^bb0(%x: f32, %y: f32, %o: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %o, %p : f32
        linalg.yield %s : f32
      }} -> tensor<{lead}{m}x{n}xf32>
      return %r : tensor<{lead}{m}x{n}xf32>
    }}"""
    pipeline = tuple(p for p in lower_pipeline(2) if with_kernel or p != PACKED_MATMUL)
    lowered = run_stage(parse_module(text, new_context()), "lower", pipeline)
    return _load(lowered, [torch.float32], 2, None)


def best_of(fns, repeats: int) -> list[float]:
    """Each function's best time, calls interleaved round by round."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for spent, fn in zip(times, fns):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [min(spent) for spent in times]


def runnable_targets() -> list[str]:
    bits, fma = target.host_isa()
    names = ["x86-64-v2"] + (["x86-64-v3"] if bits >= 256 and fma else []) + ["host"]
    return names if platform.machine() == "x86_64" else ["host"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help="[BxB..x]M,K,N (default: GPT-2 small's)")
    parser.add_argument(
        "--target", action="append", help=f"JIT target (default: each this CPU runs): {list(target.TARGETS)}"
    )
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{'target':<10} {'shape':<16} {'kernel':>9} {'loops':>9} {'torch':>9}   GFLOP/s kernel/loops/torch   loops/kernel kernel/torch"
    )
    for name in options.target or runnable_targets():
        os.environ[target.ENV] = name
        for shape in options.shape or GPT2_SHAPES:
            batch_text, _, dims = shape.rpartition("x") if "x" in shape else ("", "", shape)
            batch = [int(d) for d in batch_text.split("x") if d]
            m, k, n = (int(d) for d in dims.split(","))
            a, b = torch.randn(*batch, m, k), torch.randn(*batch, k, n)
            kernel, loops = program(batch, m, k, n, True), program(batch, m, k, n, False)
            for fn in (kernel, loops):
                fn(a, b)
            t_kernel, t_loops, t_torch = best_of(
                [lambda: kernel(a, b), lambda: loops(a, b), lambda: a @ b], options.repeats
            )
            flop = 2 * m * k * n * math.prod(batch)
            rates = "/".join(f"{flop / t / 1e9:.0f}" for t in (t_kernel, t_loops, t_torch))
            print(
                f"{name:<10} {shape:<16} {t_kernel * 1e3:7.2f}ms {t_loops * 1e3:7.2f}ms {t_torch * 1e3:7.2f}ms"
                f"   {rates:>26}   {t_loops / t_kernel:11.1f}x {t_kernel / t_torch:11.1f}x",
                flush=True,
            )
            kernel.close()
            loops.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
