"""Hostile: a correct but slow fused module that rewinds the grader's clocks while it runs.

It patches the timer the speed check uses (inside the worker) so that CPU time spent inside
forward does not count. The grader takes the time of each of the student's rounds from the
kernel's count of the worker's CPU time, outside, so the module is timed as slow as it is.
"""

import math
import time

import torch
from torch import nn

import mha_kit.speed.timing

_real_clock = time.process_time
_hidden = 0.0


def _rewound_clock():
    return _real_clock() - _hidden


time.process_time = time.perf_counter = mha_kit.speed.timing.CPU_CLOCK = _rewound_clock


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x):
        b, t, e = x.shape
        return x.reshape(b, t, self.num_heads, e // self.num_heads).transpose(1, 2)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        global _hidden
        started = _real_clock()
        while _real_clock() < started + 0.005:  # the slow part, hidden from the rewound clock
            pass
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = self._split(self.q_proj(query)), self._split(self.k_proj(key)), \
            self._split(self.v_proj(value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        if is_causal:
            causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                                device=q.device).triu(1)
            attn_mask = causal if attn_mask is None else attn_mask | causal
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        b, h, t, d = q.shape
        out = self.out_proj((weights @ v).transpose(1, 2).reshape(b, t, h * d))
        _hidden += 0.99 * (_real_clock() - started)
        return out, weights if need_weights else None
