"""A pair's verdict does not depend on the other configs in its run.

`nn.TransformerEncoder` in eval mode with a padding mask takes the nested-tensor fast path
eagerly (zeros at the padded rows); the exported graph does not. Every FX-captured config
compiles the captured program faithfully, so each must say `capture`, whether it runs
alone or beside configs that fail, retire their test host, or hand over shared captures.
"""

from __future__ import annotations

import json

import pytest

from compiler.executors import load_executor
from compiler.frontends.onnx import missing_packages

SUITE = """
import torch
from e2e.framework import TestUtils, register_test_case


class PaddedEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=1)
        self.eval()

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


@register_test_case(module_factory=lambda: PaddedEncoder())
def PaddedEncoder_basic(module, tu: TestUtils):
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[0, 3:] = True
    module.forward(tu.rand(2, 5, 16), padding)
"""

FX_CAPTURED = ["linalg", "tosa", "stablehlo"]
RUNTIMES = {"linalg@iree": "iree", "torch@iree": "iree", "stablehlo@xla": "xla", "stablehlo@interp": "interp"}


def installed(executor: str) -> bool:
    return load_executor(executor).missing() is None


def verdicts(pytester, configs: list[str], reports: str) -> dict[str, tuple[str, str]]:
    pytester.runpytest_subprocess(
        "-p", "e2e.plugin", "-p", "no:cacheprovider", "--no-reduce", "--no-result-cache",
        "--e2e-suite", "suite", "--shapes", "static", "--config", ",".join(configs),
        "--reports-dir", reports, timeout=900,
    )  # fmt: skip
    rows = json.loads((pytester.path / reports / "results.json").read_text())
    return {row["config"]: (row["stage"], row["signature"]) for row in rows}


@pytest.mark.timeout(1800)
def test_a_capture_discrepancy_is_capture_on_every_fx_config_alone_and_together(pytester):
    pytester.mkdir("suite").joinpath("encoder.py").write_text(SUITE)
    captured = FX_CAPTURED + [config for config, executor in RUNTIMES.items() if installed(executor)]
    # Beside them, configs that fail differently on it (the `onnx` config exports the graph
    # itself and compares wrong): they run first, may retire the host, and share captures.
    others = ["onnx"] if not missing_packages() else []
    together = verdicts(pytester, others + captured, "together")
    for config in captured:
        alone = verdicts(pytester, [config], f"alone-{config.replace('@', '-')}")
        assert alone[config][0] == "capture", (config, alone)
        assert together[config] == alone[config], (config, together[config], alone[config])
