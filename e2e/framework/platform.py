"""The platform a run's verdicts hold on.

Compiled programs compute the same bits on every x86-64 CPU (compiled for one fixed JIT target,
`compiler.replay_runtime.target`, and the RefBackend emits no
CPU-dependent lowering: `compiler.pipelines.LINALG_TO_LLVM`, `compiler.replay_runtime.softfloat`), but
the golden values come from native torch, whose CPU kernels are chosen by ISA: a few
ops give other answers on AVX-512 than on AVX2 or the scalar kernels (`gelu(-inf)`:
0 with AVX-512, NaN otherwise). So the platform of a run is torch's kernel ISA
(`ATEN_CPU_CAPABILITY=default|avx2|avx512` forces one), and an xfail entry may name the
platforms it holds on (`e2e.configs.xfails`).
"""

from __future__ import annotations

import functools
from pathlib import Path

# CPU features that decide which kernels and instructions are used, as /proc/cpuinfo names them.
_FEATURES = ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16")


@functools.cache
def torch_cpu_capability() -> str:
    """torch's CPU kernel ISA in lower case: `default`, `avx2`, `avx512`, ..."""
    import torch

    return torch.backends.cpu.get_cpu_capability().lower()


@functools.cache
def cpu_description() -> str:
    """The CPU's model name and its features that matter here (Linux; else the machine)."""
    import platform

    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    present = [f for f in _FEATURES if f in flags]
    return f"{model or platform.machine()} [{' '.join(present) or 'none of ' + ','.join(_FEATURES)}]"
