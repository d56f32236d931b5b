"""Zoo: decoder-only language models (rotary embeddings, RMSNorm, GQA, sliding windows,
learned positions), from `transformers` config classes with random weights."""

import transformers  # noqa: F401  (without it this file registers nothing: ImportError)

from e2e.test_suite.zoo_common import VOCAB, register_zoo, text_model

# Every model: hidden 32, 2 layers, 4 heads, vocab 128.
SIZES = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    vocab_size=VOCAB,
    max_position_embeddings=64,
)

DECODERS = [
    # rotary embeddings (a non-persistent `inv_freq` buffer), RMSNorm, SiLU MLP, GQA (4 q / 2 kv heads)
    text_model("Llama", "LlamaConfig", "LlamaModel", **SIZES, num_key_value_heads=2),
    # Llama plus a sliding attention window shorter than the sequence
    text_model("Mistral", "MistralConfig", "MistralModel", **SIZES, num_key_value_heads=2, sliding_window=4),
    # biased q/k/v projections
    text_model("Qwen2", "Qwen2Config", "Qwen2Model", **SIZES, num_key_value_heads=2),
    # multi-query attention (1 kv head), GeGLU, scaled embeddings, (1 + w) RMSNorm
    text_model("Gemma", "GemmaConfig", "GemmaModel", **SIZES, num_key_value_heads=1, head_dim=8),
    # learned positions, LayerNorm, fused qkv Conv1D, GELU
    text_model(
        "Gpt2",
        "GPT2Config",
        "GPT2Model",
        n_embd=32,
        n_layer=2,
        n_head=4,
        vocab_size=VOCAB,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
    ),
    # learned positions with an offset computed from the attention mask
    text_model(
        "Opt",
        "OPTConfig",
        "OPTModel",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        word_embed_proj_dim=32,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=2,
    ),
]

for model in DECODERS:
    register_zoo(model)
