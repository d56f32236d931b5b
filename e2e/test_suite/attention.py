"""Attention: `scaled_dot_product_attention` with each of its arguments (masks of both
kinds, causal, an explicit scale, grouped-query heads) and the masks models build."""

import torch
import torch.nn.functional as F

from e2e.framework import op_tests


def qkv(tu, heads=4, kv_heads=4):
    return [tu.rand(2, heads, 6, 8), tu.rand(2, kv_heads, 6, 8), tu.rand(2, kv_heads, 6, 8)]


def causal_bool(tu):
    return [*qkv(tu), torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()]


def padding_float(tu):
    mask = torch.zeros(2, 1, 1, 6)
    mask[1, ..., 4:] = float("-inf")  # the second row's last two keys are padding
    return [*qkv(tu), mask]


sdpa = F.scaled_dot_product_attention
op_tests(
    "Sdpa",
    {
        "Plain": lambda q, k, v: sdpa(q, k, v),
        "Causal": lambda q, k, v: sdpa(q, k, v, is_causal=True),
        # The scale models pass when they scale the query themselves (OPT, T5: 1.0).
        "ScaleOne": lambda q, k, v: sdpa(q, k, v, scale=1.0),
        "ScaleQuarter": lambda q, k, v: sdpa(q, k, v, scale=0.25),
    },
    inputs=qkv,
)
op_tests(
    "SdpaMask",
    {
        "Bool": lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
        "BoolScaled": lambda q, k, v, m: sdpa(q, k, v, attn_mask=m, scale=0.5),
        "Expanded": lambda q, k, v, m: sdpa(q, k, v, attn_mask=m.expand(2, 4, 6, 6)),
    },
    inputs=causal_bool,
)
op_tests(
    "SdpaPadding",
    {
        "Float": lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
    },
    inputs=padding_float,
)
op_tests(
    "SdpaGqa",
    {
        "Plain": lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
    },
    inputs=lambda tu: qkv(tu, heads=4, kv_heads=2),
)
