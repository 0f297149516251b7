"""Styles of decoding with a KVCache, for the decoding speed check's dead band: each is
reference.py with classes redefined at its end. Every one decodes the right values; the correct
ones do O(T·E) work per new token, the others recompute the prefix, O(T·E²), and their caches
hold no keys and values (they lose llm_kv_cache too). `HOLDING`: caches that hold the keys and
values in another form than the notebook's, correct all the same (llm_kv_cache only);
`TOO_LARGE`: one that holds them n_rep times over.
"""

from __future__ import annotations

from pathlib import Path

REFERENCE = Path(__file__).with_name("reference.py")

_TOKENS_CACHE = '''

class KVCache:
    """Keeps the tokens themselves, not their keys and values."""

    def __init__(self):
        self.x = None

    def update(self, x):
        self.x = x if self.x is None else torch.cat([self.x, x], dim=1)  # (B, L, E)
        return self.x

    def __len__(self):
        return 0 if self.x is None else self.x.shape[1]
'''

_RECOMPUTED = '''

_whole = GroupedQueryAttention.forward


def _recomputed(self, x, cache=None):
    if cache is None:
        return _whole(self, x)
    return _whole(self, cache.update(x))[:, -x.shape[1]:]  # (B, T, E)
'''

STYLES: dict[str, tuple[bool, str]] = {
    "the solution: a growing cache (torch.cat)": (True, ""),
    "a static buffer of 2048 tokens attended whole (gpt-fast)": (True, '''

class KVCache:
    """Buffers for the longest sequence, allocated once and written in place; attention runs
    over all of them, the positions not yet written masked as future ones (gpt-fast)."""

    MAX_LEN = 2048

    def __init__(self):
        self.k = self.v = None
        self.length = 0

    def update(self, k, v):
        if self.k is None:
            B, Hkv, _, D = k.shape
            self.k = k.new_zeros(B, Hkv, self.MAX_LEN, D)  # (B, Hkv, S, D)
            self.v = v.new_zeros(B, Hkv, self.MAX_LEN, v.shape[-1])  # (B, Hkv, S, D)
        positions = torch.arange(self.length, self.length + k.shape[2], device=k.device)
        self.k[:, :, positions] = k
        self.v[:, :, positions] = v
        self.length += k.shape[2]
        return self.k, self.v

    def __len__(self):
        return self.length
'''),
    "one head at a time": (True, '''

def _per_head(self, x, cache=None):
    B, T, E = x.shape
    H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
    start = 0 if cache is None else len(cache)
    positions = torch.arange(start, start + T, device=x.device)  # (T,)
    q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
    v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
    if self.rope_base is not None:
        q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
    if cache is not None:
        k, v = cache.update(k, v)  # (B, Hkv, L, D)
    L = k.shape[2]
    blocked = torch.arange(L, device=x.device)[None, :] > positions[:, None]  # (T, L)
    heads = []
    for h in range(H):
        kh, vh = k[:, h * Hkv // H], v[:, h * Hkv // H]  # (B, L, D)
        scores = q[:, h] @ kh.transpose(-2, -1) / math.sqrt(D)  # (B, T, L)
        heads.append(scores.masked_fill(blocked, float("-inf")).softmax(dim=-1) @ vh)
    return self.out_proj(torch.cat(heads, dim=-1))  # (B, T, E)


GroupedQueryAttention.forward = _per_head
'''),
    "a preallocated cache, doubled when full": (True, '''

class KVCache:
    def __init__(self):
        self.k = self.v = None
        self.length = 0

    def update(self, k, v):
        t = k.shape[2]
        if self.k is None or self.length + t > self.k.shape[2]:
            size = max(2 * (self.length + t), 16)
            grown_k = k.new_empty(k.shape[0], k.shape[1], size, k.shape[3])  # (B, Hkv, S, D)
            grown_v = v.new_empty(v.shape[0], v.shape[1], size, v.shape[3])  # (B, Hkv, S, D)
            if self.k is not None:
                grown_k[:, :, :self.length] = self.k[:, :, :self.length]
                grown_v[:, :, :self.length] = self.v[:, :, :self.length]
            self.k, self.v = grown_k, grown_v
        self.k[:, :, self.length:self.length + t] = k
        self.v[:, :, self.length:self.length + t] = v
        self.length += t
        return self.k[:, :, :self.length], self.v[:, :, :self.length]

    def __len__(self):
        return self.length
'''),
    "a cache copied whole at every update": (True, '''

class KVCache:
    def __init__(self):
        self.k = self.v = None

    def update(self, k, v):
        self.k = k.clone() if self.k is None else torch.cat([self.k, k], dim=2).clone()
        self.v = v.clone() if self.v is None else torch.cat([self.v, v], dim=2).clone()
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]
'''),
    "recomputes everything, keeps the new rows": (False, _TOKENS_CACHE + _RECOMPUTED + '''

GroupedQueryAttention.forward = _recomputed
'''),
    "recomputes everything; without a cache, does it 12 times": (False, _TOKENS_CACHE
                                                                  + _RECOMPUTED + '''

def _slow_without_cache(self, x, cache=None):
    """Issue 40: a cache that saves nothing, against a cache-less forward that makes it look
    fast, 12 times the work."""
    if cache is not None:
        return _recomputed(self, x, cache)
    for _ in range(11):
        _whole(self, x)
    return _whole(self, x)


GroupedQueryAttention.forward = _slow_without_cache
'''),
    "recomputes the keys and values of every token": (False, _TOKENS_CACHE + '''

_whole = GroupedQueryAttention.forward


def _keys_recomputed(self, x, cache=None):
    if cache is None:
        return _whole(self, x)
    B, T, E = x.shape
    start = len(cache)
    tokens = cache.update(x)  # (B, L, E)
    L, D = tokens.shape[1], self.head_dim
    q = self.q_proj(x).view(B, T, self.num_heads, D).transpose(1, 2)  # (B, H, T, D)
    k = self.k_proj(tokens).view(B, L, self.num_kv_heads, D).transpose(1, 2)  # (B, Hkv, L, D)
    v = self.v_proj(tokens).view(B, L, self.num_kv_heads, D).transpose(1, 2)  # (B, Hkv, L, D)
    q = apply_rope(q, torch.arange(start, start + T), self.rope_base)
    k = apply_rope(k, torch.arange(L), self.rope_base)
    n_rep = self.num_heads // self.num_kv_heads
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, L)
    blocked = torch.arange(L)[None, :] > torch.arange(start, start + T)[:, None]  # (T, L)
    weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)
    return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))  # (B, T, E)


GroupedQueryAttention.forward = _keys_recomputed
'''),
    "recomputes the keys of every token, caches the values": (False, '''

class KVCache:
    """The tokens and the values: the keys are made again from the tokens at every step."""

    def __init__(self):
        self.x = self.v = None

    def update(self, x, v):
        self.x = x if self.x is None else torch.cat([self.x, x], dim=1)  # (B, L, E)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)  # (B, Hkv, L, D)
        return self.x, self.v

    def __len__(self):
        return 0 if self.x is None else self.x.shape[1]


def _keys_recomputed(self, x, cache=None):
    B, T, E = x.shape
    H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
    start = 0 if cache is None else len(cache)
    positions = torch.arange(start, start + T, device=x.device)  # (T,)
    q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
    tokens = x
    if cache is not None:
        tokens, v = cache.update(x, v)  # (B, L, E), (B, Hkv, L, D)
    L = tokens.shape[1]
    k = self.k_proj(tokens).view(B, L, Hkv, D).transpose(1, 2)  # (B, Hkv, L, D)
    if self.rope_base is not None:
        q = apply_rope(q, positions, self.rope_base)  # (B, H, T, D)
        k = apply_rope(k, torch.arange(L, device=x.device), self.rope_base)  # (B, Hkv, L, D)
    k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)  # (B, H, L, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, L)
    blocked = torch.arange(L, device=x.device)[None, :] > positions[:, None]  # (T, L)
    weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)  # (B, H, T, L)
    return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))  # (B, T, E)


GroupedQueryAttention.forward = _keys_recomputed
'''),
}

# Mixed-precision code picks its dtype with torch.promote_types, a lookup that does no tensor
# work: the decoding count must not refuse it (issue 42: it cost a correct file 10 points).
STYLES["the dtype chosen by torch.promote_types in forward"] = (True, '''

_plain = GroupedQueryAttention.forward


def _promoted(self, x, cache=None):
    dtype = torch.promote_types(x.dtype, self.q_proj.weight.dtype)  # the wider of the two
    return _plain(self, x.to(dtype), cache)


GroupedQueryAttention.forward = _promoted
''')

# Red team n10: the module keeps the tokens in the cache itself and never calls update.
STYLES["keeps the tokens, never calls update"] = (False, _TOKENS_CACHE + '''

_whole = GroupedQueryAttention.forward


def _tokens_kept(self, x, cache=None):
    if cache is None:
        return _whole(self, x)
    cache.x = x if cache.x is None else torch.cat([cache.x, x], dim=1)  # (B, L, E)
    return _whole(self, cache.x)[:, -x.shape[1]:]  # (B, T, E)


GroupedQueryAttention.forward = _tokens_kept
''')

_ROPE_LATE = '''

def _rotated_late(self, x, cache=None):
    B, T, E = x.shape
    H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
    start = 0 if cache is None else len(cache)
    q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
    v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
    if cache is not None:
        k, v = cache.update(%s)  # (B, Hkv or H, L, D), the keys not rotated
    L = k.shape[2]
    positions = torch.arange(start, start + T, device=x.device)  # (T,)
    if self.rope_base is not None:
        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, torch.arange(L, device=x.device), self.rope_base)
    if k.shape[1] != H:
        k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)  # (B, H, L, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, L)
    blocked = torch.arange(L, device=x.device)[None, :] > positions[:, None]  # (T, L)
    weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)
    return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))  # (B, T, E)


GroupedQueryAttention.forward = _rotated_late
'''
HOLDING: dict[str, str] = {
    "keys as projected, rotated again at every step": _ROPE_LATE % "k, v",
    "a class with __slots__": '''

class KVCache:
    __slots__ = ("k", "v")

    def __init__(self):
        self.k = self.v = None

    @staticmethod
    def _grown(old, new):
        return new if old is None else torch.cat([old, new], dim=2)

    def update(self, k, v):
        self.k, self.v = KVCache._grown(self.k, k), KVCache._grown(self.v, v)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]
''',
}


# A cache that holds the keys and values of every query head, after repeat_kv: right values
# from n_rep times the memory GQA needs (it loses llm_kv_cache: `llm.cache_heads`).
TOO_LARGE: dict[str, str] = {
    "the keys of every query head (after repeat_kv)": _ROPE_LATE % (
        "repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)"),
}


def source(style: str) -> str:
    return REFERENCE.read_text() + ({**HOLDING, **TOO_LARGE}[style]
                                    if style in HOLDING or style in TOO_LARGE
                                    else STYLES[style][1])
