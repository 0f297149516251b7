"""Seed 000's formulation: heads folded into the batch, torch.bmm, nn.Softmax(dim=2).

Renamed to the contract: query_size/key_size/value_size -> query_dim/key_dim/value_dim,
hidden_size -> qk_head_dim (and v_head_dim), linear_q/k/v/o -> q_proj/k_proj/v_proj/out_proj.
The seed has no mask, dropout or weights output; those lines are marked "added".
"""

import math

import torch
from torch import nn


class GeneralMultiHeadAttention(nn.Module):
    def __init__(self, query_dim, num_heads, *, key_dim=None, value_dim=None, qk_head_dim=None,
                 v_head_dim=None, out_dim=None, context_length=None, dropout=0.0, qkv_bias=True):
        super().__init__()
        if qk_head_dim is None:  # added: the default head size
            if query_dim % num_heads:
                raise ValueError("query_dim must be divisible by num_heads")
            qk_head_dim = query_dim // num_heads
        v_head_dim = v_head_dim or qk_head_dim  # added
        self.num_heads = num_heads
        self.hidden_size = qk_head_dim
        self.q_proj = nn.Linear(query_dim, qk_head_dim * num_heads, bias=qkv_bias)
        self.k_proj = nn.Linear(key_dim or query_dim, qk_head_dim * num_heads, bias=qkv_bias)
        self.v_proj = nn.Linear(value_dim or query_dim, v_head_dim * num_heads, bias=qkv_bias)
        self.softmax = nn.Softmax(dim=2)
        self.out_proj = nn.Linear(v_head_dim * num_heads, out_dim or query_dim)
        self.dropout = nn.Dropout(dropout)  # added
        if context_length is not None:  # added
            self.register_buffer("mask", torch.ones(context_length, context_length,
                                                    dtype=torch.bool).triu(1))

    def forward(self, query, key=None, value=None):
        key = query if key is None else key  # added: self-attention defaults
        value = key if value is None else value
        batch_size = query.shape[0]
        num_querys = query.shape[1]
        num_pairs = key.shape[1]

        query = self.q_proj(query)
        key = self.k_proj(key)
        value = self.v_proj(value)

        query = query.reshape(batch_size, num_querys, self.num_heads, -1)
        key = key.reshape(batch_size, num_pairs, self.num_heads, -1)
        value = value.reshape(batch_size, num_pairs, self.num_heads, -1)

        query = query.permute(0, 2, 1, 3).reshape(batch_size * self.num_heads, num_querys, -1)
        key = key.permute(0, 2, 3, 1).reshape(batch_size * self.num_heads, self.hidden_size, -1)
        score = torch.bmm(query, key) / math.sqrt(self.hidden_size)
        if hasattr(self, "mask"):  # added
            score = score.masked_fill(self.mask[:num_querys, :num_pairs], float("-inf"))
        weight = self.dropout(self.softmax(score))  # added: dropout

        value = value.permute(0, 2, 1, 3).reshape(batch_size * self.num_heads, num_pairs, -1)
        output = torch.bmm(weight, value)

        output = output.reshape(batch_size, self.num_heads, num_querys, -1)
        output = output.permute(0, 2, 1, 3).reshape(batch_size, num_querys, -1)

        weights = weight.reshape(batch_size, self.num_heads, num_querys, num_pairs)  # added
        return self.out_proj(output), weights
