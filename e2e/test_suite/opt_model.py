"""A real model: a small random-config Hugging Face `OPTModel` (no weights, no tokenizer).

Needs `transformers` (the `models` extra); without it nothing is registered.
"""

from __future__ import annotations

import importlib.util

import torch

from e2e.framework import TestUtils, register_test_case

OPT_CONFIG = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    ffn_dim=64,
    vocab_size=100,
    max_position_embeddings=64,
    word_embed_proj_dim=32,
)


class OptLastHiddenState(torch.nn.Module):
    """`OPTModel` in eval mode, returning `last_hidden_state` only."""

    def __init__(self, attn_implementation: str):
        super().__init__()
        from transformers import OPTConfig, OPTModel

        config = OPTConfig(**OPT_CONFIG, attn_implementation=attn_implementation)
        with torch.random.fork_rng():  # the same random weights in every process
            torch.manual_seed(0)
            self.model = OPTModel(config).eval()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def opt_inputs(tu: TestUtils) -> list[torch.Tensor]:
    input_ids = tu.randint(1, 8, low=0, high=100)
    attention_mask = torch.ones(1, 8, dtype=torch.int64)
    return [input_ids, attention_mask]


def _transformers_installed() -> bool:
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # ValueError: a module stubbed out as None
        return False


if _transformers_installed():
    # Attention as explicit matmul + softmax.
    @register_test_case(module_factory=lambda: OptLastHiddenState("eager"))
    def OptModel_basic(module, tu: TestUtils):
        module.forward(*opt_inputs(tu))

    # The default attention, `scaled_dot_product_attention`.
    @register_test_case(module_factory=lambda: OptLastHiddenState("sdpa"))
    def OptModel_sdpa(module, tu: TestUtils):
        module.forward(*opt_inputs(tu))
