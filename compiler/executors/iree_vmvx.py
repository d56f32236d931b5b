"""IREE's portable interpreter target, `vmvx`: the same compiler and runtime as `iree`, but no
native code for the CPU: dispatches run on IREE's VM with its vector extensions. A third
executor for the same IR, independent of LLVM's code generation for x86 (and so of its
undefined-behaviour choices there): what llvm-cpu and vmvx both compute is IREE's meaning
of the program; where only llvm-cpu differs, look at its code generation.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.executors.iree import Iree


@dataclass
class IreeVmvx(Iree):
    name: str = "iree-vmvx"
    title: str = "IREE (vmvx)"

    def device_flags(self) -> tuple[str, ...]:
        return ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx")
