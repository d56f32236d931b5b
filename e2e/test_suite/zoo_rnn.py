"""Zoo: recurrent networks (nn.RNN, nn.LSTM, nn.GRU), two layers, batch first."""

import torch

from e2e.test_suite.zoo_common import TestUtils, ZooModel, register_zoo, seeded

FEATURES, HIDDEN = 16, 32


class Recurrent(torch.nn.Module):
    """A two-layer `cell` over a batch-first sequence; the outputs and the last hidden state."""

    def __init__(self, cell: type[torch.nn.RNNBase], bidirectional: bool = False):
        super().__init__()
        self.rnn = cell(FEATURES, HIDDEN, num_layers=2, batch_first=True, bidirectional=bidirectional)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs, state = self.rnn(x)
        last_hidden = state[0] if isinstance(state, tuple) else state  # LSTM: (h, c)
        return outputs, last_hidden


def sequences(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [tu.randn(batch, seq, FEATURES)]


RNNS = [
    ZooModel("Rnn", lambda: seeded(lambda: Recurrent(torch.nn.RNN)), sequences, [[-1, -1, FEATURES]]),
    ZooModel("Lstm", lambda: seeded(lambda: Recurrent(torch.nn.LSTM)), sequences, [[-1, -1, FEATURES]]),
    ZooModel(
        "BiGru", lambda: seeded(lambda: Recurrent(torch.nn.GRU, bidirectional=True)), sequences, [[-1, -1, FEATURES]]
    ),
]

for model in RNNS:
    register_zoo(model)
