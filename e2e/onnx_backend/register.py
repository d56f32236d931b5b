"""ONNX backend cases as e2e tests: one test per case, named `<kind>/<test name>`.

A case's module carries its ONNX model (`onnx_model`); natively it returns ONNX's
expected outputs, which become the golden trace, so every config that takes ONNX models
(`model_formats`) is compared with ONNX's reference results using the suite's dtype
table. A case that cannot be expressed is registered with its skip reason.
"""

from __future__ import annotations

import zlib
from collections import Counter

import torch

from e2e.framework.registry import Test, register
from e2e.onnx_backend.cases import OnnxCase

CI_SHARE = 16  # the `onnx_backend_ci` slice: one case in CI_SHARE, by a hash of its name


class OnnxModelModule(torch.nn.Module):
    """An ONNX model with its expected outputs: what the `onnx` config compiles, and,
    run natively, ONNX's reference results."""

    def __init__(self, onnx_model: bytes, expected: list[torch.Tensor]):
        super().__init__()
        self.onnx_model = onnx_model
        self.expected = expected

    def forward(self, *inputs: torch.Tensor):
        outputs = tuple(tensor.clone() for tensor in self.expected)
        return outputs[0] if len(outputs) == 1 else outputs


def in_ci_slice(name: str) -> bool:
    return zlib.crc32(name.encode()) % CI_SHARE == 0


def _factory(case: OnnxCase):
    return lambda: OnnxModelModule(case.model, case.outputs)


def _invoker(case: OnnxCase):
    def invoke(module, tu) -> None:
        module.forward(*(tensor.clone() for tensor in case.inputs))

    return invoke


def register_cases(cases: list[OnnxCase], source: str) -> Counter:
    """Register every case; returns how many were registered with each skip reason."""
    skipped: Counter = Counter()
    for case in cases:
        if case.skip_reason is not None:
            skipped[case.skip_reason] += 1
        marks = ("onnx_backend", "onnx_backend_ci") if in_ci_slice(case.name) else ("onnx_backend",)
        register(
            Test(
                case.name,
                _factory(case),
                _invoker(case),
                source=f"{source} ({case.kind} case of the onnx backend test suite)",
                defined_in=source,
                marks=marks,
                model_format="onnx",
                skip_reason=None if case.skip_reason is None else f"ONNX case not expressible: {case.skip_reason}",
            )
        )
    return skipped
