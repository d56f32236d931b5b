"""Zoo: PyTorch's own transformer modules (nn.TransformerEncoder with a padding mask,
nn.Transformer with a causal target mask), d_model 32, 2 layers, batch first."""

import torch

from e2e.test_suite.zoo_common import TestUtils, ZooModel, register_zoo, seeded

D_MODEL = 32


class PaddedEncoder(torch.nn.Module):
    """nn.TransformerEncoder over a padded batch (`src_key_padding_mask`, True = padding).

    In eval mode under `no_grad`, PyTorch runs its fast path: a nested tensor that
    zeroes the padded rows. A captured program computes the padded rows like any other,
    so the nested tensor is turned off here and the golden run agrees with every capture.
    """

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(D_MODEL, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=padding)


class Seq2SeqTransformer(torch.nn.Module):
    """nn.Transformer: source and target sequences, a causal mask over the target."""

    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Transformer(
            D_MODEL,
            4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            dim_feedforward=64,
            dropout=0.0,
            batch_first=True,
        )

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        causal = torch.nn.Transformer.generate_square_subsequent_mask(target.shape[1])
        # Saying the mask is causal spares PyTorch comparing it with one, a data-dependent
        # check torch.export cannot capture.
        return self.transformer(source, target, tgt_mask=causal, tgt_is_causal=True)


def padded_batch(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    padding = torch.zeros(batch, seq, dtype=torch.bool)
    padding[-1, seq - 2 :] = True
    return [tu.randn(batch, seq, D_MODEL), padding]


def source_target(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [tu.randn(batch, seq, D_MODEL), tu.randn(batch, seq - 2, D_MODEL)]


TRANSFORMERS = [
    ZooModel("TransformerEncoder", lambda: seeded(PaddedEncoder), padded_batch, [[-1, -1, D_MODEL], [-1, -1]]),
    ZooModel("Transformer", lambda: seeded(Seq2SeqTransformer), source_target, [[-1, -1, D_MODEL], [-1, -1, D_MODEL]]),
]

for model in TRANSFORMERS:
    register_zoo(model)
