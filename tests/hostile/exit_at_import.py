"""Hostile: ends the process while the file loads, after defining a correct function."""

import os


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)


os._exit(3)
