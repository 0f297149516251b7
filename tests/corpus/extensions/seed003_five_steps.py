"""Seed 003's formulation: its five steps as matrix products, X @ W with the weight matrices,
reshape then transpose(1, 2), `(Q @ K^T) / d_k ** 0.5`, F.softmax, and `context @ W_O`.

Renamed to the contract: W_Q/W_K/W_V/W_O -> the weights of q_proj/k_proj/v_proj/out_proj (the
seed's X @ W is X @ weight.T for an nn.Linear weight), h -> num_heads, d_k/d_v -> qk_head_dim/
v_head_dim. Biases, cross-attention sizes, the mask, dropout and the weights are "added".
"""

import torch
import torch.nn.functional as F
from torch import nn


class GeneralMultiHeadAttention(nn.Module):
    def __init__(self, query_dim, num_heads, *, key_dim=None, value_dim=None, qk_head_dim=None,
                 v_head_dim=None, out_dim=None, context_length=None, dropout=0.0, qkv_bias=True):
        super().__init__()
        if qk_head_dim is None and query_dim % num_heads:
            raise ValueError(f"query_dim={query_dim} is not divisible by num_heads={num_heads}")
        self.h = num_heads
        self.d_k = qk_head_dim or query_dim // num_heads
        self.d_v = v_head_dim or self.d_k
        self.q_proj = nn.Linear(query_dim, num_heads * self.d_k, bias=qkv_bias)
        self.k_proj = nn.Linear(key_dim or query_dim, num_heads * self.d_k, bias=qkv_bias)
        self.v_proj = nn.Linear(value_dim or query_dim, num_heads * self.d_v, bias=qkv_bias)
        self.out_proj = nn.Linear(num_heads * self.d_v, out_dim or query_dim)
        self.dropout = nn.Dropout(dropout)  # added
        if context_length is not None:  # added
            self.register_buffer("mask", torch.ones(context_length, context_length,
                                                    dtype=torch.bool).triu(1))

    @staticmethod
    def _times(x, linear):
        out = x @ linear.weight.T
        return out if linear.bias is None else out + linear.bias  # added: the bias

    def forward(self, query, key=None, value=None):
        key = query if key is None else key  # added: cross-attention inputs
        value = key if value is None else value
        batch_size, L, _ = query.shape
        S = key.shape[1]  # added

        # 1. project
        Q = self._times(query, self.q_proj)
        K = self._times(key, self.k_proj)
        V = self._times(value, self.v_proj)

        # 2. split into heads
        Q = Q.reshape(batch_size, L, self.h, self.d_k).transpose(1, 2)
        K = K.reshape(batch_size, S, self.h, self.d_k).transpose(1, 2)
        V = V.reshape(batch_size, S, self.h, self.d_v).transpose(1, 2)

        # 3. scaled dot-product attention on every head at once
        attn_scores = (Q @ K.transpose(-2, -1)) / (self.d_k ** 0.5)
        if hasattr(self, "mask"):  # added
            attn_scores = attn_scores.masked_fill(self.mask[:L, :S], float("-inf"))
        attn_weights = self.dropout(F.softmax(attn_scores, dim=-1))  # added: dropout
        context = attn_weights @ V

        # 4. merge the heads
        context = context.transpose(1, 2).reshape(batch_size, L, self.h * self.d_v)

        # 5. output projection
        output = self._times(context, self.out_proj)
        return output, attn_weights
