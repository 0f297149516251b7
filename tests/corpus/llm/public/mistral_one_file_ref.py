"""Public code: Mistral's one-file reference (interleaved RoPE, repeat_kv, banded window mask).

Copied, logic unchanged, from
  mistralai/mistral-inference (formerly mistral-src), one_file_ref.py
  @ cad0f614499e04855035c6665903aff87498f68b: repeat_kv, _reshape_for_broadcast,
  apply_rotary_emb, precompute_freqs_cis, and the mask of Transformer.forward.
  License: Apache License 2.0 (the repository's LICENSE).
Mistral's layout is (batch, seq, heads, head_dim) and its RoPE pairs (2i, 2i + 1), as Meta's.
The glue at the end maps the kit's contract.
"""
# ruff: noqa: E501, UP006, UP035

from typing import Tuple

import torch


def _repeat_kv(keys: torch.Tensor, values: torch.Tensor, repeats: int):  # repeat_kv, renamed
    keys = torch.repeat_interleave(keys, repeats=repeats, dim=2)
    values = torch.repeat_interleave(values, repeats=repeats, dim=2)
    return keys, values


def _reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """
    freqs_cis: complex - (seq_len, head_dim / 2)
    x: complex - (bsz, seq_len, head_dim / 2)
    """
    ndim = x.ndim
    assert 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1]), (
        freqs_cis.shape,
        (x.shape[1], x.shape[-1]),
    )
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(
    xq: torch.Tensor,
    xk: torch.Tensor,
    freqs_cis: torch.Tensor,
) -> Tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = _reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def _window_mask(seqlen, sliding_window, dtype=torch.float32, device=None):
    # the body of Transformer.forward's `if input_ids.shape[1] > 1:` branch
    tensor = torch.full(
        (seqlen, seqlen),
        dtype=dtype,
        fill_value=1,
        device=device,
    )
    mask = torch.tril(tensor, diagonal=0).to(dtype)
    # make the mask banded to account for sliding window
    mask = torch.triu(mask, diagonal=-sliding_window+1)
    mask = torch.log(mask)
    return mask


# ----------------------------------------------------------------- glue: the kit's contract


def apply_rope(x, positions, base=10000.0):
    """x (..., T, D) -> (batch, T, heads=1, D); freqs_cis rows picked by position, as
    Transformer.forward does with self.freqs_cis[positions]."""
    T, D = x.shape[-2], x.shape[-1]
    freqs_cis = precompute_freqs_cis(D, int(positions.max()) + 1, theta=base)
    freqs_cis = freqs_cis.to(x.device)[positions]  # (T, D/2)
    xs = x.reshape(-1, T, D).unsqueeze(2)  # (N, T, 1, D)
    out, _ = apply_rotary_emb(xs, xs, freqs_cis)
    return out.squeeze(2).reshape(x.shape)


def repeat_kv(x, n_rep):
    """(B, Hkv, T, D) -> Mistral's (B, T, Hkv, D) and back."""
    keys, _ = _repeat_kv(x.transpose(1, 2), x.transpose(1, 2), n_rep)
    return keys.transpose(1, 2)


def sliding_window_mask(T, window):
    """Mistral's additive mask (0 where attended, -inf elsewhere) as the kit's bool mask."""
    return _window_mask(T, window) == 0
