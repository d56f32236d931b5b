"""The README's Python examples run as written.

Each ```python block runs alone, given only what its prose takes as the reader's own:
`torch`, a `model` (a Linear layer 16 -> 4) and its input `x`. Blocks that register
tests do so in an empty registry, so they neither clash with the suite nor leak into it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from e2e.framework import registry

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block, monkeypatch):
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    model = torch.nn.Linear(16, 4)
    x = torch.rand(3, 16)
    namespace = {"torch": torch, "model": model, "x": x, "__name__": "readme_example"}
    exec(compile(block, str(README), "exec"), namespace)
    if "out" in namespace:  # an example that computes the model's output computes it right
        torch.testing.assert_close(namespace["out"], model(x))
