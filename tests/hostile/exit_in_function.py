"""Hostile: os._exit inside one function. Only that check is lost; the worker restarts."""

import os

import torch


def split_heads(x, num_heads):
    os._exit(7)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
