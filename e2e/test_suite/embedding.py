"""Embedding lookups: nn.Embedding, padding_idx, index dtypes, dynamic index shapes, one_hot."""

import torch
import torch.nn.functional as F

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case


@e2e_test(
    inputs=lambda tu, shape, dtype=torch.int64: [tu.randint(*shape, high=10, dtype=dtype)],
    params={
        "Indices1d": dict(shape=(5,)),
        "Indices2d": dict(shape=(2, 4)),
        "Indices3d": dict(shape=(2, 2, 3)),
        "IndicesInt32": dict(shape=(3, 4), dtype=torch.int32),
        "PaddingIdx": dict(shape=(3, 4), padding_idx=0),
    },
)
class Embedding(torch.nn.Module):
    def __init__(self, shape, dtype=None, padding_idx=None):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 6, padding_idx=padding_idx)

    def forward(self, indices):
        return self.embedding(indices)


@e2e_test(inputs=lambda tu: [tu.randint(3, 7, high=20)], dynamic=True)
class EmbeddingDynamicIndices(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 8)

    def forward(self, indices):
        return self.embedding(indices)


@e2e_test(inputs=lambda tu: [tu.randint(2, 5, high=16)], dynamic=[[-1, -1]])
class EmbeddingPlusPosition(torch.nn.Module):
    """Token plus learned position embeddings, positions from the dynamic sequence length."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(16, 8)
        self.positions = torch.nn.Embedding(12, 8)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))


op_test("EmbeddingFunctional_WeightInput", F.embedding, lambda tu: [tu.randint(2, 3, high=5), tu.randn(5, 4)])
op_test(
    "EmbeddingFunctional_Float64Weight",
    F.embedding,
    lambda tu: [tu.randint(4, high=5), tu.randn(5, 3, dtype=torch.float64)],
)
op_test(
    "EmbeddingThenMeanPool",
    lambda i, w: F.embedding(i, w).mean(1),
    lambda tu: [tu.randint(2, 6, high=8), tu.randn(8, 4)],
)
op_test(
    "EmbeddingBagSum",
    lambda i, o, w: F.embedding_bag(i, w, o, mode="sum"),
    lambda tu: [tu.randint(6, high=8), torch.tensor([0, 2, 5]), tu.randn(8, 4)],
)
op_test("OneHot", lambda i: F.one_hot(i, 5), lambda tu: [tu.randint(2, 3, high=5)])


class EmbeddingModuleI64(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(num_embeddings=100, embedding_dim=50, padding_idx=4)

    @export
    @annotate_args([None, ([-1, -1], torch.int64, True)])
    def forward(self, indices):
        return self.embed.forward(indices)


@register_test_case(module_factory=lambda: EmbeddingModuleI64())
def EmbeddingModuleI64_basic(module, tu: TestUtils):
    module.forward(tu.randint(3, 3, high=100))
