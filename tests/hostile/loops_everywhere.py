"""Hostile: every function and module loops forever, to reach the overall cap."""

from torch import nn


def _forever(*args, **kwargs):
    while True:
        pass


split_heads = scaled_scores = causal_mask = attend = merge_heads = output_projection = _forever


class _Forever(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        _forever()


AttentionHead = LoopedMultiHeadAttention = MultiHeadAttention = _Forever
