"""Seed 002's formulation: a per-head q/k size apart from the per-head v size, view then
transpose(1, 2), a float32 scale tensor `1 / sqrt(qk_size)`, and a projection back to the
token size.

Renamed to the contract: token_size -> query_dim, qk_size -> qk_head_dim, v_size -> v_head_dim,
head_num -> num_heads, W_q/W_k/W_v/W -> q_proj/k_proj/v_proj/out_proj. Cross-attention sizes,
the mask, dropout and the weights output are "added".
"""

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

        self.query_dim = query_dim
        self.qk_head_dim = qk_head_dim
        self.v_head_dim = v_head_dim or qk_head_dim
        self.num_heads = num_heads

        self.q_proj = nn.Linear(query_dim, qk_head_dim * num_heads, bias=qkv_bias)
        self.k_proj = nn.Linear(key_dim or query_dim, qk_head_dim * num_heads, bias=qkv_bias)
        self.v_proj = nn.Linear(value_dim or query_dim, self.v_head_dim * num_heads,
                                bias=qkv_bias)
        self.scale = 1 / torch.sqrt(torch.tensor(qk_head_dim))

        self.out_proj = nn.Linear(self.v_head_dim * num_heads, out_dim or query_dim)
        self.dropout = nn.Dropout(dropout)  # added
        if context_length is not None:  # added
            self.register_buffer("mask", torch.ones(context_length, context_length,
                                                    dtype=torch.bool).triu(1))

    def forward(self, query, key=None, value=None):
        key = query if key is None else key  # added: cross-attention inputs
        value = key if value is None else value
        batch, token_num, query_dim = query.shape
        assert self.query_dim == query_dim, "the token size differs from query_dim"
        pair_num = key.shape[1]  # added

        q = self.q_proj(query).contiguous().view(batch, token_num, self.num_heads,
                                                 self.qk_head_dim).transpose(1, 2)
        k = self.k_proj(key).contiguous().view(batch, pair_num, self.num_heads,
                                               self.qk_head_dim).transpose(1, 2)
        v = self.v_proj(value).contiguous().view(batch, pair_num, self.num_heads,
                                                 self.v_head_dim).transpose(1, 2)

        score = torch.matmul(q, k.transpose(2, 3)) * self.scale
        if hasattr(self, "mask"):  # added
            score = score.masked_fill(self.mask[:token_num, :pair_num], float("-inf"))
        score = self.dropout(torch.softmax(score, dim=-1))  # added: dropout

        b_t_h = torch.matmul(score, v).transpose(1, 2)

        b_concate = b_t_h.contiguous().view(batch, token_num, self.num_heads * self.v_head_dim)

        b = self.out_proj(b_concate)

        return b, score  # added: the per-head weights
