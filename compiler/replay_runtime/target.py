"""The CPU the JIT compiles for: a fixed baseline, not the host.

MLIR's ExecutionEngine builds its TargetMachine for the host: the host's CPU name and every
feature it has (AVX-512 included), and the Python bindings offer no other choice. But LLVM
picks each function's subtarget from the function's own `target-cpu` and `target-features`
attributes when it has them, and that features string *replaces* the TargetMachine's. So a
function that carries both is compiled for them, whatever the host. (A `target-cpu` alone
changes nothing: the host's features string still applies.)

`pin(module)` gives every function of a lowered (LLVM dialect) module the target's CPU and
features before the JIT sees it. The default, `x86-64-v2` (SSE4.2 and POPCNT: every x86-64
CPU since 2009, qemu's Nehalem included), makes two machines run the same instructions, so a
program with undefined behaviour (an out-of-range `fptoui`, a shift past the width) reads
the same on both: without it, `fptoui` of -3.0 gives -3 on an AVX2 CPU (a signed 64-bit
conversion) and -1 on an AVX-512 one (`vcvttss2usi` saturates).

The choice is the environment's `E2E_JIT_TARGET` (a name of `TARGETS`; `host`: LLVM's own
choice for this CPU), so forked hosts, reducers and a bundle's replay inherit it. The real
runtimes that compile for the CPU follow it too: IREE's llvm-cpu target CPU, XLA's
`--xla_cpu_max_isa`.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

from torch_mlir import ir

ENV = "E2E_JIT_TARGET"


@dataclass(frozen=True)
class JitTarget:
    name: str
    cpu: str | None  # None: the host's CPU and features (no attributes set)
    features: tuple[str, ...] = ()  # beside those the CPU implies; never empty when cpu is set
    # XLA's `--xla_cpu_max_isa`: the same instruction set where XLA can go that low. jaxlib itself
    # needs AVX, and under SSE4_2 XLA's JIT cannot link its f16 conversions ("Failed to
    # materialize symbols: wrapped_convert"), so XLA's floor is AVX2: fixed, if not the same.
    xla_isa: str | None = None
    # What code written for the target (`compiler.replay_runtime.matmul`) may assume: its
    # vector registers' width in bits and whether it fuses a multiply-add. None: the host's.
    vector_bits: int | None = None
    fma: bool | None = None

    def vector_width(self) -> int:
        """f32 lanes in one of the target's vector registers."""
        return (self.vector_bits or host_isa()[0]) // 32

    def fuses_multiply_add(self) -> bool:
        return host_isa()[1] if self.fma is None else self.fma

    def identity(self) -> str:
        """All that code compiled for this target depends on (`host`: this CPU's vectors and FMA too)."""
        return f"{self} lanes={self.vector_width()} fma={self.fuses_multiply_add()}"

    def iree_cpu(self) -> str:
        """IREE's `--iree-llvmcpu-target-cpu` for this target."""
        return self.cpu or "host"


TARGETS = {
    target.name: target
    for target in (
        JitTarget("x86-64-v2", "x86-64-v2", ("+sse4.2", "+popcnt"), "AVX2", vector_bits=128, fma=False),
        JitTarget("x86-64-v3", "x86-64-v3", ("+avx2", "+fma"), "AVX2", vector_bits=256, fma=True),
        JitTarget("host", None),
    )
}
DEFAULT = "x86-64-v2" if platform.machine() in ("x86_64", "AMD64") else "host"


@functools.cache
def host_isa() -> tuple[int, bool]:
    """(vector bits, fused multiply-add) of this CPU, as LLVM's host target uses them: from
    /proc/cpuinfo's flags on x86-64; elsewhere 128-bit vectors with FMA (AArch64's NEON)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return 128, True
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        flags = []
    bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    return bits, "fma" in flags


def jit_target() -> JitTarget:
    """The target named by `E2E_JIT_TARGET` (default `x86-64-v2` on x86-64, else `host`)."""
    name = os.environ.get(ENV) or DEFAULT
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"{ENV}={name!r}: unknown JIT target; known: {', '.join(TARGETS)}") from None


def pin(module: ir.Module, target: JitTarget | None = None) -> None:
    """Give every `llvm.func` of `module` the target's CPU and features (in place)."""
    target = target or jit_target()
    if target.cpu is None:
        return
    with module.context:
        cpu = ir.StringAttr.get(target.cpu)
        features = ir.Attribute.parse(
            "#llvm.target_features<[" + ", ".join(f'"{feature}"' for feature in target.features) + "]>"
        )
        for op in module.body.operations:
            if op.operation.name == "llvm.func":
                op.attributes["target_cpu"] = cpu
                op.attributes["target_features"] = features
