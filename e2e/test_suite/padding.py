"""Padding: F.pad in every mode over 1-d/2-d/3-d spatial dims, asymmetric, negative, dynamic."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

# Pad widths per spatial rank; the input has batch and channel dims in front.
PADS = {
    1: {"Sym": (2, 2), "Asym": (0, 3), "One": (1, 0)},
    2: {"Sym": (1, 1, 1, 1), "Asym": (2, 0, 1, 3), "HeightOnly": (0, 0, 2, 1)},
    3: {"Sym": (1, 1, 1, 1, 1, 1), "DepthOnly": (0, 0, 0, 0, 1, 2)},
}
SHAPES = {1: (2, 3, 6), 2: (1, 2, 5, 6), 3: (1, 2, 4, 4, 5)}

for mode in ("constant", "reflect", "replicate", "circular"):
    for rank, cases in PADS.items():
        op_tests(
            f"Pad{mode.capitalize()}{rank}d",
            {case: lambda x, p=pads, m=mode: F.pad(x, p, mode=m) for case, pads in cases.items()},
            inputs=lambda tu, r=rank: [tu.randn(*SHAPES[r])],
        )
    op_tests(
        f"Pad{mode.capitalize()}Dynamic",
        {"2d": lambda x, m=mode: F.pad(x, (1, 2, 2, 1), mode=m)},
        inputs=lambda tu: [tu.randn(1, 2, 5, 6)],
        dynamic=[[-1, 2, -1, -1]],
    )

op_tests(
    "PadConstant",
    inputs=lambda tu: [tu.randn(2, 3, 4)],
    fns={
        "Value": lambda x: F.pad(x, (1, 1), value=-3.5),
        "Negative": lambda x: F.pad(x, (-1, 0, 0, -1)),
        "MixedSign": lambda x: F.pad(x, (2, -1)),
        "AllDims": lambda x: F.pad(x, (1, 1, 1, 1, 1, 1)),
        "ZeroWidth": lambda x: F.pad(x, (0, 0)),
        "ConstantPadNd": lambda x: torch.constant_pad_nd(x, [1, 2], 0.5),
        "Int64": lambda x: F.pad((x * 10).long(), (1, 2), value=7),
        "Bool": lambda x: F.pad(x > 0, (1, 1)),
        "Float16": lambda x: F.pad(x.half(), (2, 0), value=1.0),
    },
)
op_tests(
    "PadModule",
    inputs=lambda tu: [tu.randn(1, 2, 4, 5)],
    fns={
        "ZeroPad2d": torch.nn.ZeroPad2d((1, 0, 2, 1)),
        "ReflectionPad2d": torch.nn.ReflectionPad2d(2),
        "ReplicationPad2d": torch.nn.ReplicationPad2d((0, 1, 1, 0)),
        "CircularPad2d": torch.nn.CircularPad2d(1),
        "ConstantPad2d": torch.nn.ConstantPad2d((1, 1, 0, 2), 2.0),
        "PadThenConv": lambda x: F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), torch.ones(3, 2, 3, 3) / 9),
    },
)
