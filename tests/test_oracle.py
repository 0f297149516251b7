"""The oracle is PyTorch: check that it loads weights and masks the way torch means them."""

import math

import pytest
import torch
import torch.nn.functional as F

from mha_kit import oracle


def _params(E, kdim, vdim, gen):
    def r(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64)

    return {"q_proj.weight": r(E, E), "k_proj.weight": r(E, kdim), "v_proj.weight": r(E, vdim),
            "out_proj.weight": r(E, E), "q_proj.bias": r(E), "k_proj.bias": r(E),
            "v_proj.bias": r(E), "out_proj.bias": r(E)}


def _by_hand(p, query, key, value, H, mask):
    """Multi-head attention from the paper's formula, head by head with primitives."""
    q = F.linear(query, p["q_proj.weight"], p["q_proj.bias"])
    k = F.linear(key, p["k_proj.weight"], p["k_proj.bias"])
    v = F.linear(value, p["v_proj.weight"], p["v_proj.bias"])
    D = q.shape[-1] // H
    heads, weights = [], []
    for h in range(H):
        cols = slice(h * D, (h + 1) * D)
        s = q[..., cols] @ k[..., cols].transpose(-1, -2) / math.sqrt(D)
        w = torch.softmax(s.masked_fill(mask, -math.inf) if mask is not None else s, -1)
        heads.append(w @ v[..., cols])
        weights.append(w)
    return F.linear(torch.cat(heads, -1), p["out_proj.weight"], p["out_proj.bias"]), \
        torch.stack(weights, 1)


@pytest.mark.parametrize("kdim,vdim,tk", [(8, 8, 5), (3, 6, 7)])
def test_torch_mha_matches_the_formula(kdim, vdim, tk):
    gen = torch.Generator().manual_seed(0)
    E, H = 8, 2
    p = _params(E, kdim, vdim, gen)
    query = torch.randn(2, 5, E, generator=gen, dtype=torch.float64)
    key = torch.randn(2, tk, kdim, generator=gen, dtype=torch.float64)
    value = torch.randn(2, tk, vdim, generator=gen, dtype=torch.float64)
    mask = torch.rand(5, tk, generator=gen) < 0.3
    mask[:, 0] = False
    mha = oracle.torch_mha(p, E, H, kdim if kdim != E else None, vdim if vdim != E else None)
    out, weights = oracle.multi_head_attention(mha, query, key, value, mask)
    want_out, want_weights = _by_hand(p, query, key, value, H, mask)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(weights, want_weights)


def test_step_oracles_agree_with_the_usual_formulas():
    x = torch.randn(2, 3, 12, dtype=torch.float64)
    split = oracle.split_heads(x, 4)
    torch.testing.assert_close(split, x.view(2, 3, 4, 3).transpose(1, 2))
    torch.testing.assert_close(oracle.merge_heads(split), x)
    assert torch.equal(oracle.causal_mask(4), torch.ones(4, 4, dtype=torch.bool).triu(1))
    q, k = torch.randn(2, 4, 5, 3), torch.randn(2, 4, 6, 3)
    torch.testing.assert_close(oracle.scaled_scores(q, k), q @ k.transpose(-1, -2) / 3 ** 0.5)


def test_attend_oracle_is_stable_for_huge_logits():
    scores = torch.tensor([[1000.0, 999.0, -1000.0]], dtype=torch.float64)
    out, weights = oracle.attend(scores, torch.eye(3, dtype=torch.float64),
                                 torch.tensor([[False, False, True]]))
    assert torch.isfinite(weights).all() and weights[0, 2] == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, dtype=torch.float64))
