"""Hostile: the forbidden APIs where the watch is not: on another thread, in a forked child.

The fused module runs `F.multi_head_attention_forward` (what nn.MultiheadAttention runs) on a
ThreadPoolExecutor thread; `attend` runs SDPA in a forked child and reads its output back
through a pipe. Each earned every point it touched before the worker refused both.
"""

import os
import pickle
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F
from torch import nn


def attend(scores, v, mask=None):
    read, write = os.pipe()
    if os.fork() == 0:  # the child: its torch calls are watched by nobody
        scores = scores if mask is None else scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(-1)
        identity = torch.eye(scores.shape[-1], dtype=v.dtype)  # SDPA's q·kᵀ is the scores
        out = F.scaled_dot_product_attention(scores, identity, v, scale=1.0)
        os.write(write, pickle.dumps((out, weights)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        return pickle.loads(answer.read())


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads, self.dropout = num_heads, dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(self._attention, query, key, value, attn_mask, is_causal,
                               need_weights).result()

    def _attention(self, query, key, value, attn_mask, is_causal, need_weights):
        E = query.shape[-1]
        if is_causal:
            causal = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool,
                                device=query.device).triu(1)
            attn_mask = causal if attn_mask is None else attn_mask | causal
        biases = None if self.q_proj.bias is None else torch.cat(
            [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        out, weights = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), E,
            self.num_heads, None, biases, None, None, False, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=True, q_proj_weight=self.q_proj.weight,
            k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
            average_attn_weights=False)
        return out.transpose(0, 1), weights
