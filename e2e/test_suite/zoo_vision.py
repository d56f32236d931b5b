"""Zoo: vision and speech models. A ViT and a ResNet from `transformers` config classes,
a small wav2vec2 (conv feature extractor + transformer) and a hand-written CNN.

Images are `batch x 3 x 16 x 16`; only the batch varies in the dynamic tests, except
for the CNN, whose global pooling takes any image size, and wav2vec2, whose waveform
length varies.
"""

import torch
import transformers  # noqa: F401  (without it this file registers nothing: ImportError)

from e2e.test_suite.zoo_common import HfModel, TestUtils, ZooModel, register_zoo, seeded

IMAGE = 16


class HfVision(HfModel):
    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(pixel_values=pixel_values), self.output)


class HfSpeech(HfModel):
    def forward(self, input_values: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(input_values=input_values), self.output)


def images(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [tu.randn(batch, 3, IMAGE, IMAGE)]


def square_images(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [tu.randn(batch, 3, seq, seq)]


def waveforms(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [tu.randn(batch, 40 * seq)]  # 40 samples per frame after the conv stack


class SmallResidualCnn(torch.nn.Module):
    """conv-bn-relu stem, one residual block, max pool, global average pool, linear head."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU())
        self.block = torch.nn.Sequential(
            torch.nn.Conv2d(16, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
        )
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(16, classes)
        for module in self.modules():  # non-trivial running statistics, as a trained net has
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.pool(torch.relu(x + self.block(x)))
        return self.head(x.mean(dim=(2, 3)))


VISION = [
    ZooModel(
        "Vit",
        lambda: HfVision(
            "ViTConfig",
            "ViTModel",
            image_size=IMAGE,
            patch_size=4,
            num_channels=3,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
        ),
        images,
        [[-1, 3, IMAGE, IMAGE]],
    ),
    ZooModel(
        "ResNet",
        lambda: HfVision(
            "ResNetConfig",
            "ResNetModel",
            "pooler_output",
            num_channels=3,
            embedding_size=16,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            layer_type="basic",
        ),
        images,
        [[-1, 3, IMAGE, IMAGE]],
    ),
    ZooModel(
        "Wav2Vec2",
        lambda: HfSpeech(
            "Wav2Vec2Config",
            "Wav2Vec2Model",
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            conv_dim=(16, 16, 16),
            conv_kernel=(10, 3, 3),
            conv_stride=(5, 2, 2),
            num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=4,
            vocab_size=32,
        ),
        waveforms,
        [[-1, -1]],
    ),
    ZooModel("Cnn", lambda: seeded(SmallResidualCnn), square_images, [[-1, 3, -1, -1]]),
]

for model in VISION:
    register_zoo(model)
