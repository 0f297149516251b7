"""Seed 001's formulation: permute, contiguous().view to (B*H, T, D), matmul, and the weights
returned beside the output.

Renamed to the contract: embed_size -> query_dim, query/key/value/fc_out ->
q_proj/k_proj/v_proj/out_proj. The seed's divisibility assert raises ValueError here (an
assert vanishes under `python -O`). Cross-attention sizes, the mask and dropout are "added".
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GeneralMultiHeadAttention(nn.Module):
    def __init__(self, query_dim, num_heads, *, key_dim=None, value_dim=None, qk_head_dim=None,
                 v_head_dim=None, out_dim=None, context_length=None, dropout=0.0, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = qk_head_dim or query_dim // num_heads

        if qk_head_dim is None and self.head_dim * num_heads != query_dim:
            raise ValueError("Embedding size must be divisible by number of heads")
        self.v_head_dim = v_head_dim or self.head_dim  # added

        self.q_proj = nn.Linear(query_dim, num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(key_dim or query_dim, num_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(value_dim or query_dim, num_heads * self.v_head_dim,
                                bias=qkv_bias)

        self.out_proj = nn.Linear(num_heads * self.v_head_dim, out_dim or query_dim)
        self.dropout = nn.Dropout(dropout)  # added
        if context_length is not None:  # added
            self.register_buffer("mask", torch.triu(
                torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1))

    def forward(self, query, key=None, value=None):
        key = query if key is None else key  # added: cross-attention inputs
        value = key if value is None else value
        batch_size = query.shape[0]
        seq_len = query.shape[1]
        kv_len = key.shape[1]  # added

        Q = self.q_proj(query)
        K = self.k_proj(key)
        V = self.v_proj(value)

        Q = Q.reshape(batch_size, seq_len, self.num_heads, self.head_dim)
        K = K.reshape(batch_size, kv_len, self.num_heads, self.head_dim)
        V = V.reshape(batch_size, kv_len, self.num_heads, self.v_head_dim)

        Q = Q.permute(0, 2, 1, 3).contiguous().view(batch_size * self.num_heads, seq_len,
                                                    self.head_dim)
        K = K.permute(0, 2, 1, 3).contiguous().view(batch_size * self.num_heads, kv_len,
                                                    self.head_dim)
        V = V.permute(0, 2, 1, 3).contiguous().view(batch_size * self.num_heads, kv_len,
                                                    self.v_head_dim)

        scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.head_dim ** 0.5)
        if hasattr(self, "mask"):  # added
            scores = scores.masked_fill(self.mask[:seq_len, :kv_len], float("-inf"))
        attention_weights = self.dropout(F.softmax(scores, dim=-1))  # added: dropout

        output = torch.matmul(attention_weights, V)

        output = output.view(batch_size, self.num_heads, seq_len, self.v_head_dim)
        output = output.permute(0, 2, 1, 3).contiguous().view(
            batch_size, seq_len, self.num_heads * self.v_head_dim)

        output = self.out_proj(output)

        # The per-head weights, (B*H, T, T) in the seed, as (B, H, Tq, Tk).
        return output, attention_weights.view(batch_size, self.num_heads, seq_len, kv_len)
