"""Prints the PyTorch values that tests/nn/test_transformer_blocks.cpp (PyTorchRecorded.*) checks.

Run: /work/main/.venv-bench/bin/python tests/nn/record_transformer_values.py  (recorded with
torch 2.15.0, float64). Inputs are formulas of the flat index, which the test rebuilds.
"""
import math

import torch
import torch.nn.functional as F


def pattern(shape, f):
    return torch.tensor([f(i) for i in range(math.prod(shape))], dtype=torch.float64).reshape(shape)


def show(values):
    print(", ".join(repr(v) for v in values))


queries = pattern((1, 4, 3, 4), lambda i: math.sin(0.37 * i + 0.1))
keys = pattern((1, 2, 3, 4), lambda i: math.cos(0.23 * i + 0.2))
values = pattern((1, 2, 3, 4), lambda i: math.sin(0.011 * i * i + 0.3))
show(F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True).flatten().tolist())

logits = pattern((6, 5), lambda i: 3 * math.sin(0.7 * i))
targets = torch.tensor([2, -100, 0, 4, 1, 3])
show([F.cross_entropy(logits, targets).item(), F.cross_entropy(logits, targets, reduction="sum").item()])

x = pattern((7,), lambda i: i - 3.0)
show(F.gelu(x).tolist())
show(F.gelu(x, approximate="tanh").tolist())
