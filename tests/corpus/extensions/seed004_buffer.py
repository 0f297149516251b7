"""Seed 004's formulation: a float triu mask registered as the buffer `mask` of context_length,
`.bool()[:T, :T]` in forward, masked_fill_ in place, softmax of scores / sqrt(head_dim), then
dropout on the weights; view then transpose(1, 2), contiguous().view to merge.

Renamed to the contract: d_in -> query_dim, W_query/W_key/W_value -> q_proj/k_proj/v_proj,
d_out -> num_heads * head_dim. The seed's divisibility assert raises ValueError here. The seed is
always causal: a mask only when context_length is given is "added", as are cross-attention
sizes, v_head_dim, out_dim and the weights output.
"""

import torch
import torch.nn as nn


class GeneralMultiHeadAttention(nn.Module):
    def __init__(self, query_dim, num_heads, *, key_dim=None, value_dim=None, qk_head_dim=None,
                 v_head_dim=None, out_dim=None, context_length=None, dropout=0.0, qkv_bias=True):
        super().__init__()
        if qk_head_dim is None and query_dim % num_heads != 0:
            raise ValueError("query_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = qk_head_dim or query_dim // num_heads
        self.v_head_dim = v_head_dim or self.head_dim  # added

        self.q_proj = nn.Linear(query_dim, num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(key_dim or query_dim, num_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(value_dim or query_dim, num_heads * self.v_head_dim,
                                bias=qkv_bias)
        self.out_proj = nn.Linear(num_heads * self.v_head_dim, out_dim or query_dim)
        self.dropout = nn.Dropout(dropout)
        if context_length is not None:
            self.register_buffer("mask",
                                 torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, query, key=None, value=None):
        key = query if key is None else key  # added: cross-attention inputs
        value = key if value is None else value
        b, num_tokens, _ = query.shape
        num_pairs = key.shape[1]  # added
        keys = self.k_proj(key)
        queries = self.q_proj(query)
        values = self.v_proj(value)

        keys = keys.view(b, num_pairs, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_pairs, self.num_heads, self.v_head_dim)

        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        if hasattr(self, "mask"):  # added: the condition
            mask_bool = self.mask.bool()[:num_tokens, :num_pairs]
            attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens,
                                                    self.num_heads * self.v_head_dim)
        context_vec = self.out_proj(context_vec)
        return context_vec, attn_weights  # added: the per-head weights
