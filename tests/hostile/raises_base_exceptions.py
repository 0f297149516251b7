"""Hostile: SystemExit, KeyboardInterrupt and a home-made BaseException from functions."""

import torch


class Escape(BaseException):
    """Not an Exception: slips past `except Exception`."""


def split_heads(x, num_heads):
    raise SystemExit(0)


def merge_heads(x):
    raise KeyboardInterrupt


def scaled_scores(q, k):
    raise Escape("out of here")


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
