"""Hostile: megabytes of printing, through print and straight to the file descriptors."""

import os
import sys

print("x" * 5_000_000)
os.write(1, b"y" * 1_000_000)
os.write(2, b"z" * 1_000_000)


def split_heads(x, num_heads):
    print("\033[2J" + "noise " * 400_000)  # a screen-clearing escape among the noise
    sys.stderr.write("e" * 1_000_000)
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)
