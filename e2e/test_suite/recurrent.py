"""Recurrent cells and layers: RNN/GRU/LSTM cells, multi-layer, bidirectional, batch_first."""

import torch

from e2e.framework import e2e_test


class Cell(torch.nn.Module):
    """One step of a cell, then a second step from its own state (state reuse)."""

    def __init__(self, kind, **kwargs):
        super().__init__()
        torch.manual_seed(0)  # the weights are part of the test
        self.cell = getattr(torch.nn, kind)(4, 3, **kwargs)

    def forward(self, x, h):
        state = (h, h) if isinstance(self.cell, torch.nn.LSTMCell) else h
        first = self.cell(x, state)
        return first, self.cell(x * 0.5, first)


e2e_test(
    inputs=lambda tu: [tu.randn(2, 4), tu.randn(2, 3)],
    params={
        "RNNTanh": dict(kind="RNNCell"),
        "RNNRelu": dict(kind="RNNCell", nonlinearity="relu"),
        "RNNNoBias": dict(kind="RNNCell", bias=False),
        "GRU": dict(kind="GRUCell"),
        "GRUNoBias": dict(kind="GRUCell", bias=False),
        "LSTM": dict(kind="LSTMCell"),
        "LSTMNoBias": dict(kind="LSTMCell", bias=False),
    },
)(Cell)
e2e_test(
    inputs=lambda tu: [tu.randn(3, 4), tu.randn(3, 3)],
    name="CellDynamicBatch",
    dynamic=[[-1, 4], [-1, 3]],
    params={k: dict(kind=k) for k in ("RNNCell", "GRUCell", "LSTMCell")},
)(Cell)


class Layer(torch.nn.Module):
    """A whole recurrent layer over a short sequence; returns outputs and final state."""

    def __init__(self, kind, **kwargs):
        super().__init__()
        torch.manual_seed(0)
        self.layer = getattr(torch.nn, kind)(4, 3, **kwargs)

    def forward(self, x):
        return self.layer(x)


LAYER_VARIANTS = {
    "": {},
    "TwoLayers": dict(num_layers=2),
    "Bidirectional": dict(bidirectional=True),
    "BatchFirst": dict(batch_first=True),
    "NoBias": dict(bias=False),
}
e2e_test(
    inputs=lambda tu: [tu.randn(5, 2, 4)],
    name="RecurrentLayer",
    params={
        kind + variant: dict(kind=kind, **kwargs)
        for kind in ("RNN", "GRU", "LSTM")
        for variant, kwargs in LAYER_VARIANTS.items()
    },
)(Layer)
e2e_test(
    inputs=lambda tu: [tu.randn(4, 2, 4)],
    name="RecurrentLayerProjected",
    params={"LSTM": dict(kind="LSTM", proj_size=2)},
)(Layer)


class UnrolledCell(torch.nn.Module):
    """A hand-unrolled LSTM cell loop: a Python loop the frontends trace out."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.cell = torch.nn.LSTMCell(4, 3)

    def forward(self, x):
        h = c = torch.zeros(x.shape[1], 3)
        outputs = []
        for step in range(x.shape[0]):
            h, c = self.cell(x[step], (h, c))
            outputs.append(h)
        return torch.stack(outputs)


e2e_test(inputs=lambda tu: [tu.randn(4, 2, 4)])(UnrolledCell)
