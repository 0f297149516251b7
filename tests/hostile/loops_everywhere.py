"""Hostile: every function and module loops forever, to reach the overall cap. Asleep rather
than busy: the same hang to the grader, without a core kept busy for the cap's seconds (the
busy loops are infinite_loop.py's and infinite_loop_at_import.py's)."""

import time

from torch import nn


def _forever(*args, **kwargs):
    while True:
        time.sleep(1)


split_heads = scaled_scores = causal_mask = attend = merge_heads = output_projection = _forever


class _Forever(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        _forever()


AttentionHead = LoopedMultiHeadAttention = MultiHeadAttention = _Forever
