"""Small whole models: MLPs, a multi-head attention block written out, a transformer block, a conv net."""

import math

import torch
import torch.nn.functional as F

from e2e.framework import TestUtils, Tolerance, annotate_args, e2e_test, export, register_test_case


class Mlp(torch.nn.Module):
    def __init__(self, sizes=(8, 16, 16, 4), activation=torch.nn.ReLU, dropout=0.0):
        super().__init__()
        layers = []
        for n_in, n_out in zip(sizes[:-2], sizes[1:-1]):
            layers += [torch.nn.Linear(n_in, n_out), activation(), torch.nn.Dropout(dropout)]
        layers.append(torch.nn.Linear(sizes[-2], sizes[-1]))
        self.layers = torch.nn.Sequential(*layers)
        self.eval()  # dropout off

    def forward(self, x):
        return self.layers(x)


e2e_test(
    inputs=lambda tu: [tu.randn(5, 8)],
    name="Mlp",
    params={
        "Relu": dict(),
        "GeluWithDropoutEval": dict(activation=torch.nn.GELU, dropout=0.5),
        "Tanh": dict(activation=torch.nn.Tanh),
    },
)(Mlp)
e2e_test(inputs=lambda tu: [tu.randn(6, 8)], name="Mlp_DynamicBatch", dynamic=[[-1, 8]])(Mlp)


class MultiHeadSelfAttention(torch.nn.Module):
    """Multi-head attention written out: q/k/v projections, scaled dot product, softmax, output."""

    def __init__(self, embed_dim=16, num_heads=4, causal=False):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.causal = causal
        self.q = torch.nn.Linear(embed_dim, embed_dim)
        self.k = torch.nn.Linear(embed_dim, embed_dim)
        self.v = torch.nn.Linear(embed_dim, embed_dim)
        self.out = torch.nn.Linear(embed_dim, embed_dim)

    def split_heads(self, x):
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        batch, seq, embed = x.shape
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(x)), self.split_heads(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if self.causal:
            mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(batch, seq, embed)
        return self.out(context)


e2e_test(
    inputs=lambda tu: [tu.randn(2, 5, 16)],
    name="MultiHeadSelfAttention",
    params={"Basic": dict(), "Causal": dict(causal=True), "SingleHead": dict(num_heads=1)},
)(MultiHeadSelfAttention)
e2e_test(inputs=lambda tu: [tu.randn(2, 5, 16)], name="MultiHeadSelfAttention_DynamicBatchSeq", dynamic=[[-1, -1, 16]])(
    MultiHeadSelfAttention
)


@e2e_test(
    inputs=lambda tu: [tu.randn(2, 4, 6, 8), tu.randn(2, 4, 6, 8), tu.randn(2, 4, 6, 8)],
    params={"NoMask": dict(causal=False), "Causal": dict(causal=True)},
)
class ScaledDotProductAttention(torch.nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


@e2e_test(inputs=lambda tu: [tu.randn(2, 5, 16)])
class TorchMultiheadAttention(torch.nn.Module):
    """torch.nn.MultiheadAttention in eval mode (its fused path decomposes differently)."""

    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.eval()

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


@e2e_test(inputs=lambda tu: [tu.randn(2, 5, 16)], params={"Static": dict()})
class TransformerBlock(torch.nn.Module):
    """Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(16)
        self.attention = MultiHeadSelfAttention(16, 4, causal=True)
        self.ln2 = torch.nn.LayerNorm(16)
        self.mlp = Mlp((16, 32, 16), activation=torch.nn.GELU, dropout=0.1)
        self.eval()

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SmallConvNet(torch.nn.Module):
    """conv-bn-relu-pool twice, global average pool, linear classifier."""

    def __init__(self, num_classes=5):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = torch.nn.Linear(16, num_classes)
        for module in self.features:
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.copy_(torch.linspace(-0.2, 0.2, module.num_features))
                module.running_var.copy_(torch.linspace(0.5, 1.5, module.num_features))
        self.eval()

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


e2e_test(inputs=lambda tu: [tu.randn(1, 3, 8, 8)], name="SmallConvNet")(SmallConvNet)
e2e_test(inputs=lambda tu: [tu.randn(2, 3, 8, 8)], name="SmallConvNet_DynamicBatch", dynamic=[[-1, 3, 8, 8]])(
    SmallConvNet
)


@e2e_test(inputs=lambda tu: [tu.randint(2, 6, high=20)])
class EmbeddingClassifier(torch.nn.Module):
    """Token embedding, mean pool, linear head, log-softmax: a bag-of-words classifier."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, ids):
        return F.log_softmax(self.head(self.embedding(ids).mean(1)), -1)


class MlpLayerModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc0 = torch.nn.Linear(3, 5)
        self.tanh0 = torch.nn.Tanh()

    @export
    @annotate_args([None, ([-1, -1], torch.float32, True)])
    def forward(self, x):
        return self.tanh0(self.fc0(x))


@register_test_case(module_factory=lambda: MlpLayerModule())
def MlpLayerModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(5, 3))


class AttentionScoresModule(torch.nn.Module):
    @export
    @annotate_args(
        [
            None,
            ([-1, -1, -1], torch.float32, True),
            ([-1, -1, -1], torch.float32, True),
            ([-1, -1, -1], torch.float32, True),
        ]
    )
    def forward(self, q, k, v):
        weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.5, dim=-1)
        return torch.bmm(weights, v)


@register_test_case(module_factory=lambda: AttentionScoresModule(), tolerance=Tolerance(rtol=1e-4, atol=1e-5))
def AttentionScoresModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 4, 8), tu.rand(2, 4, 8), tu.rand(2, 4, 8))
