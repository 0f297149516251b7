"""Hostile: lists, objects that claim to equal anything, generators and numpy arrays."""


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __bool__(self):
        return True


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2).tolist()


def merge_heads(x):
    return AlwaysEqual()


def scaled_scores(q, k):
    return (row for row in q)


def causal_mask(seq_len, device=None):
    import numpy as np

    return np.triu(np.ones((seq_len, seq_len), dtype=bool), 1)
