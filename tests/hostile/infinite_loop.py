"""Hostile: an infinite loop in one function. It times out; the next check gets a new worker."""


def split_heads(x, num_heads):
    while True:
        pass


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)
