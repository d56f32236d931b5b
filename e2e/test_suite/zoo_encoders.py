"""Zoo: encoder models with padding attention masks, and encoder-decoders, from
`transformers` config classes with random weights."""

import torch
import transformers  # noqa: F401  (without it this file registers nothing: ImportError)

from e2e.test_suite.zoo_common import (
    TEXT_DIMS,
    VOCAB,
    HfModel,
    TestUtils,
    ZooModel,
    padding_mask,
    register_zoo,
    text_model,
    token_ids,
)

BERT_SIZES = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=VOCAB,
    max_position_embeddings=64,
)

ENCODERS = [
    # absolute positions from a non-persistent `position_ids` buffer, token types
    text_model("Bert", "BertConfig", "BertModel", **BERT_SIZES),
    # positions computed from the ids (padding_idx offset)
    text_model("Roberta", "RobertaConfig", "RobertaModel", **BERT_SIZES, pad_token_id=1),
    text_model(
        "DistilBert",
        "DistilBertConfig",
        "DistilBertModel",
        dim=32,
        n_layers=2,
        n_heads=4,
        hidden_dim=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    ),
]


class HfSeq2Seq(HfModel):
    """Encoder-decoder: source ids and mask, target ids; the decoder's last hidden state."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, decoder_input_ids: torch.Tensor):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        return outputs.last_hidden_state


def seq2seq_inputs(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [token_ids(tu, batch, seq), padding_mask(batch, seq), token_ids(tu, batch, seq - 2)]


def seq2seq_model(name: str, config_class: str, model_class: str, **config) -> ZooModel:
    return ZooModel(
        name, lambda: HfSeq2Seq(config_class, model_class, **config), seq2seq_inputs, (*TEXT_DIMS, [-1, -1])
    )


SEQ2SEQ = [
    # relative position buckets, RMSNorm without mean, no biases
    seq2seq_model(
        "T5",
        "T5Config",
        "T5Model",
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        vocab_size=VOCAB,
        decoder_start_token_id=0,
    ),
    # learned positions, cross-attention with the encoder's padding mask
    seq2seq_model(
        "Bart",
        "BartConfig",
        "BartModel",
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=2,
    ),
]

for model in ENCODERS + SEQ2SEQ:
    register_zoo(model)
