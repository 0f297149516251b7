"""Hostile: allocations far beyond the worker's memory limit, by torch and by Python."""

import torch


def split_heads(x, num_heads):
    return torch.empty(10**12)  # 4 TB of float32


def merge_heads(x):
    return bytearray(10**11)


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
