"""Hostile: sys.exit half-way through the file. What came before it is still graded."""

import sys


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)


sys.exit("done early")


def merge_heads(x):  # never defined: the file stopped above
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)
