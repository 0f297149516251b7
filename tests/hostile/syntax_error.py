"""A syntax error in one function: reported with its line; the other functions still count."""

import torch


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)


def merge_heads(x)
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
