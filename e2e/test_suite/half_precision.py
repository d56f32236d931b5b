"""float16 and bfloat16 families: elementwise, matmul, reductions, normalization, casts, mixed dtypes."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests

HALF_DTYPES = {"Float16": torch.float16, "BFloat16": torch.bfloat16}

UNARY = {
    "Exp": torch.exp,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Relu": torch.relu,
    "Gelu": F.gelu,
    "Silu": F.silu,
    "Sqrt": lambda x: torch.sqrt(x.abs()),
    "Rsqrt": lambda x: torch.rsqrt(x.abs() + 1),
    "Log": lambda x: torch.log(x.abs() + 1),
    "Sin": torch.sin,
    "Abs": torch.abs,
    "Neg": torch.neg,
    "Floor": lambda x: torch.floor(x * 4),
    "Reciprocal": lambda x: torch.reciprocal(x.abs() + 1),
}
BINARY = {
    "Add": torch.add,
    "Sub": torch.sub,
    "Mul": torch.mul,
    "Div": lambda x, y: x / (y.abs() + 1),
    "Maximum": torch.maximum,
    "Minimum": torch.minimum,
    "Pow": lambda x, y: torch.pow(x.abs() + 0.5, 2),
    "AddScalar": lambda x, y: x + 1.5,
    "BroadcastRow": lambda x, y: x * y[0],
    "Gt": torch.gt,
    "Where": lambda x, y: torch.where(x > y, x, y),
    "Atan2": torch.atan2,
}
COMPOUND = {
    "Mm": lambda x, y: x @ y.t(),
    "Bmm": lambda x, y: torch.bmm(x.view(2, 2, 4), y.view(2, 4, 2)),
    "Linear": lambda x, y: F.linear(x, y, y[0, :4]),
    "Sum": lambda x, y: x.sum(1),
    "Mean": lambda x, y: x.mean(0),
    "Amax": lambda x, y: x.amax(1),
    "Argmax": lambda x, y: x.argmax(1),
    "Softmax": lambda x, y: torch.softmax(x, -1),
    "LogSoftmax": lambda x, y: torch.log_softmax(x, -1),
    "LayerNorm": lambda x, y: F.layer_norm(x, [4]),
    "ToFloat32": lambda x, y: x.float(),
    "ToInt32": lambda x, y: (x * 4).int(),
    "FromFloat32": lambda x, y: (x.float() * 3).to(x.dtype),
    "PromoteWithFloat32": lambda x, y: x + y.float(),
    "Cat": lambda x, y: torch.cat([x, y], 0),
    "Transpose": lambda x, y: x.t().contiguous(),
    "Clamp": lambda x, y: x.clamp(-0.5, 0.5),
    "Attention": lambda x, y: torch.softmax(x @ y.t() / 2, -1) @ y,
}

for dtype_name, dtype in HALF_DTYPES.items():
    make = lambda tu, d=dtype: [tu.randn(4, 4, dtype=d)]
    make2 = lambda tu, d=dtype: [tu.randn(4, 4, dtype=d), tu.randn(4, 4, dtype=d)]
    op_tests(f"{dtype_name}Unary", UNARY, inputs=make)
    op_tests(f"{dtype_name}Binary", BINARY, inputs=make2)
    op_tests(f"{dtype_name}Op", COMPOUND, inputs=make2)
    op_tests(
        f"{dtype_name}Dynamic",
        {k: COMPOUND[k] for k in ("Mm", "Sum", "Softmax", "ToFloat32")},
        inputs=make2,
        dynamic=True,
    )
