"""Resampling: F.interpolate in every mode, sizes and scale factors, align_corners, upsample modules."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

SHAPES = {1: (1, 2, 5), 2: (1, 2, 4, 5), 3: (1, 1, 3, 4, 4)}
# (spatial rank, interpolate kwargs); align_corners only where the mode takes it.
CASES = {
    "Nearest1dScale2": (1, dict(scale_factor=2, mode="nearest")),
    "Nearest1dSize": (1, dict(size=7, mode="nearest")),
    "NearestExact1d": (1, dict(size=8, mode="nearest-exact")),
    "Linear1d": (1, dict(size=9, mode="linear")),
    "Linear1dAlign": (1, dict(scale_factor=2, mode="linear", align_corners=True)),
    "Nearest2dScale2": (2, dict(scale_factor=2, mode="nearest")),
    "Nearest2dSize": (2, dict(size=(6, 7), mode="nearest")),
    "Nearest2dDownsample": (2, dict(size=(2, 3), mode="nearest")),
    "Nearest2dFractionalScale": (2, dict(scale_factor=1.5, mode="nearest")),
    "NearestExact2d": (2, dict(size=(7, 8), mode="nearest-exact")),
    "Bilinear2dScale2": (2, dict(scale_factor=2, mode="bilinear")),
    "Bilinear2dSize": (2, dict(size=(7, 9), mode="bilinear")),
    "Bilinear2dAlign": (2, dict(size=(7, 9), mode="bilinear", align_corners=True)),
    "Bilinear2dDownsample": (2, dict(size=(3, 3), mode="bilinear")),
    "Bilinear2dAntialias": (2, dict(size=(2, 3), mode="bilinear", antialias=True)),
    "Bicubic2d": (2, dict(size=(6, 8), mode="bicubic")),
    "Bicubic2dAlign": (2, dict(scale_factor=2, mode="bicubic", align_corners=True)),
    "Area2d": (2, dict(size=(2, 2), mode="area")),
    "Nearest3d": (3, dict(scale_factor=2, mode="nearest")),
    "Trilinear3d": (3, dict(size=(4, 5, 6), mode="trilinear")),
    "Trilinear3dAlign": (3, dict(scale_factor=2, mode="trilinear", align_corners=True)),
}

for name, (rank, kwargs) in CASES.items():
    op_tests(
        "Interpolate",
        {name: lambda x, k=kwargs: F.interpolate(x, **k)},
        inputs=lambda tu, r=rank: [tu.rand(*SHAPES[r])],
    )

op_tests(
    "InterpolateDynamic",
    inputs=lambda tu: [tu.rand(1, 2, 4, 5)],
    dynamic=[[-1, 2, -1, -1]],
    fns={
        "NearestScale2": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
        "BilinearScale2": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        "BilinearSize": lambda x: F.interpolate(x, size=(6, 6), mode="bilinear"),
        "NearestSize": lambda x: F.interpolate(x, size=(3, 8), mode="nearest"),
    },
)
op_tests(
    "Upsample",
    inputs=lambda tu: [tu.rand(1, 3, 3, 4)],
    fns={
        "NearestModule": torch.nn.Upsample(scale_factor=2, mode="nearest"),
        "BilinearModule": torch.nn.Upsample(size=(5, 5), mode="bilinear"),
        "UpsamplingNearest2d": torch.nn.UpsamplingNearest2d(scale_factor=3),
        "UpsamplingBilinear2d": torch.nn.UpsamplingBilinear2d(scale_factor=2),
        "PixelShuffle": lambda x: F.pixel_shuffle(x.repeat(1, 4, 1, 1)[:, :4], 2),
        "PixelUnshuffle": lambda x: F.pixel_unshuffle(x[:, :, :2, :4], 2),
        "AdaptiveAvgPoolAsResize": lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
        "NearestFloat64": lambda x: F.interpolate(x.double(), scale_factor=2, mode="nearest"),
    },
)
