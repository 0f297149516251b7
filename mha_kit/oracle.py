"""Expected values, from PyTorch itself and never from the kit's own solution.

Step functions are recomputed from plain torch primitives, written from the definition
rather than in the way a student would. Modules are compared with `torch.nn.MultiheadAttention`
loaded with the very weights the grader put into the student's module.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

Tensor = torch.Tensor


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Head h of token t is the h-th contiguous slice of its features."""
    head_dim = x.shape[-1] // num_heads
    return torch.stack(x.split(head_dim, dim=-1), dim=1)  # (B, H, T, D)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads' features, head 0 first."""
    return torch.cat(x.unbind(dim=1), dim=-1)  # (B, T, H*D)


def scaled_scores(q: Tensor, k: Tensor) -> Tensor:
    return torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> Tensor:
    """True above the diagonal, the same positions torch fills with -inf."""
    square = nn.Transformer.generate_square_subsequent_mask(seq_len, device=device)
    return torch.isneginf(square)


def causal_blocked(tq: int, tk: int, device: torch.device | str = "cpu") -> Tensor:
    """(Tq, Tk) True where blocked: query i is the last Tq of Tk tokens (bottom-right aligned,
    as in decoding), so it sees keys j <= i + Tk - Tq. SDPA's `is_causal` aligns top-left."""
    i = torch.arange(tq, device=device)[:, None] + (tk - tq)
    return torch.arange(tk, device=device)[None, :] > i  # (Tq, Tk)


def blocked_scores(q: Tensor, k: Tensor, blocked: Tensor | None,
                   scale: float | None = None) -> Tensor:
    """(B, H, Tq, Tk) q·k_j / sqrt(D) (or times `scale`), -inf where `blocked`."""
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    return scores if blocked is None else scores.masked_fill(blocked, float("-inf"))


def logsumexp(q: Tensor, k: Tensor, blocked: Tensor | None) -> Tensor:
    """(B, H, Tq): log Σ_j exp(q·k_j / sqrt(D)) over the keys a query sees."""
    return torch.logsumexp(blocked_scores(q, k, blocked), dim=-1)


def flash(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> tuple[Tensor, Tensor]:
    """What a FlashAttention forward returns for q (B, H, Tq, D), k and v (B, H, Tk, D):
    SDPA's output, causal bottom-right aligned, and the logsumexp of the scores (B, H, Tq)."""
    blocked = causal_blocked(q.shape[2], k.shape[2], q.device) if is_causal else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if blocked is None
                                         else ~blocked)
    return out, logsumexp(q, k, blocked)


QUERY_BLOCK = 64  # queries per block of flash_by_query_blocks's scores


def flash_by_query_blocks(q: Tensor, k: Tensor, v: Tensor, is_causal: bool
                          ) -> tuple[Tensor, Tensor]:
    """`flash`'s (out, logsumexp) in plain PyTorch, QUERY_BLOCK queries against every key at a
    time: no (Tq, Tk) tensor, and no API a graded submission may not call (the kit's stand-in
    for a student's FlashAttention, and its PyTorch baseline when timing a Triton kernel)."""
    Tq, Tk = q.shape[2], k.shape[2]
    outs, sums = [], []
    for start in range(0, Tq, QUERY_BLOCK):
        qb = q[:, :, start:start + QUERY_BLOCK]  # (B, H, b, D)
        scores = qb @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, b, Tk)
        if is_causal:  # query i sees keys j <= i + Tk - Tq
            rows = torch.arange(start, start + qb.shape[2], device=q.device)[:, None]  # (b, 1)
            keys = torch.arange(Tk, device=q.device)[None, :]  # (1, Tk)
            scores = scores.masked_fill(keys > rows + (Tk - Tq), float("-inf"))  # (B, H, b, Tk)
        sums.append(torch.logsumexp(scores, dim=-1))  # (B, H, b)
        outs.append(torch.exp(scores - sums[-1][..., None]) @ v)  # (B, H, b, D)
    return torch.cat(outs, dim=2), torch.cat(sums, dim=2)  # (B, H, Tq, D), (B, H, Tq)


def combined_mask(attn_mask: Tensor | None, is_causal: bool, seq_len: int,
                  device: torch.device | str | None = None) -> Tensor | None:
    """What nn.MultiheadAttention blocks given both: a position is blocked where either
    `attn_mask` (True = blocked) or, with `is_causal`, the causal mask blocks it."""
    if not is_causal:
        return attn_mask
    causal = causal_mask(seq_len, device=device)
    return causal if attn_mask is None else attn_mask | causal


def attend(scores: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def output_projection(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    return F.linear(x, weight, bias)


def sdpa_attention(
    params: dict[str, Tensor | None],
    query: Tensor,
    key: Tensor,
    value: Tensor,
    num_heads: int,
    blocked: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Multi-head attention through `F.scaled_dot_product_attention`, which takes any per-head
    q/k and v sizes: (out, weights (B, H, Tq, Tk)). The output is (B, Tq, H*Dv), or out_proj's
    when `params` has one. `blocked` is True where attention is blocked; SDPA's bool mask
    means *allowed*, so it gets the inverse."""
    q = split_heads(F.linear(query, params["q_proj.weight"], params.get("q_proj.bias")),
                    num_heads)  # (B, H, Tq, Dqk)
    k = split_heads(F.linear(key, params["k_proj.weight"], params.get("k_proj.bias")),
                    num_heads)  # (B, H, Tk, Dqk)
    v = split_heads(F.linear(value, params["v_proj.weight"], params.get("v_proj.bias")),
                    num_heads)  # (B, H, Tk, Dv)
    allowed = None if blocked is None else ~blocked
    out = merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))  # (B, Tq, H*Dv)
    if "out_proj.weight" in params:
        out = F.linear(out, params["out_proj.weight"], params.get("out_proj.bias"))
    _, weights = attend(scaled_scores(q, k), v, blocked)  # (B, H, Tq, Tk)
    return out, weights


def attention_head(
    params: dict[str, Tensor | None],
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One head: (out (B, Tq, head_dim), weights (B, Tq, Tk))."""
    out, weights = sdpa_attention(params, query, key, value, 1, attn_mask)
    return out, weights[:, 0]


def torch_mha(
    params: dict[str, Tensor | None],
    embed_dim: int,
    num_heads: int,
    kdim: int | None = None,
    vdim: int | None = None,
) -> nn.MultiheadAttention:
    """`nn.MultiheadAttention` holding the grader's weights for a fused student module."""
    bias = params.get("q_proj.bias") is not None
    first = params["q_proj.weight"]
    mha = nn.MultiheadAttention(
        embed_dim, num_heads, bias=bias, kdim=kdim, vdim=vdim, batch_first=True
    ).to(dtype=first.dtype, device=first.device)
    mha.eval()
    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(
                torch.cat([params[f"{n}_proj.weight"] for n in "qkv"], dim=0)
            )
        else:
            mha.q_proj_weight.copy_(params["q_proj.weight"])
            mha.k_proj_weight.copy_(params["k_proj.weight"])
            mha.v_proj_weight.copy_(params["v_proj.weight"])
        if bias:
            mha.in_proj_bias.copy_(torch.cat([params[f"{n}_proj.bias"] for n in "qkv"]))
            mha.out_proj.bias.copy_(params["out_proj.bias"])
        mha.out_proj.weight.copy_(params["out_proj.weight"])
    return mha


def multi_head_attention(
    mha: nn.MultiheadAttention,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Output (B, Tq, E) and per-head weights (B, H, Tq, Tk).

    Always an explicit bool mask: `is_causal` alone is silently ignored on the eval fast path.
    """
    with torch.no_grad():
        return mha(
            query,
            key,
            value,
            attn_mask=attn_mask,
            need_weights=True,
            average_attn_weights=False,
        )


# --------------------------------------------------------------------------- gradients


def _vjp(outputs: tuple[Tensor, ...], cotangents: tuple[Tensor | None, ...],
         wrt: list[Tensor]) -> tuple[Tensor | None, ...]:
    """The gradients of Σ_i (outputs[i] · cotangents[i]).sum() with respect to `wrt` (an
    output whose cotangent is None left out)."""
    loss = sum((o * c).sum() for o, c in zip(outputs, cotangents) if c is not None)
    return torch.autograd.grad(loss, wrt, allow_unused=True)


def gradients(fn, args: tuple, wrt: dict[int, str],
              cotangents: tuple[Tensor | None, ...]) -> dict[str, Tensor | None]:
    """Autograd through `fn(*args)` (one output or a tuple): the gradients of
    Σ_i (output_i · cotangents[i]).sum() with respect to the positional args named in `wrt`."""
    leaves = _leaves(args, wrt)
    with torch.enable_grad():
        outputs = fn(*(leaves.get(wrt.get(i, ""), a) for i, a in enumerate(args)))
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        grads = _vjp(outputs, cotangents, list(leaves.values()))
    return dict(zip(leaves, grads))


def _leaves(args: tuple, names: dict[int, str]) -> dict[str, Tensor]:
    """A leaf requiring grad per name; positions with one name share it (self-attention)."""
    leaves: dict[str, Tensor] = {}
    for i, name in names.items():
        leaves.setdefault(name, args[i].detach().clone().requires_grad_())
    return leaves


def attention_head_gradients(params: dict[str, Tensor | None], inputs: tuple[Tensor, ...],
                             names: dict[int, str], attn_mask: Tensor | None,
                             cotangents: tuple[Tensor, ...]) -> dict[str, Tensor | None]:
    """`attention_head`'s gradients: the inputs by `names` (position → name; one name for
    query, key and value in self-attention), then each parameter given."""
    leaves = _leaves(inputs, names)
    weights = {k: v.detach().clone().requires_grad_() for k, v in params.items()
               if v is not None}
    with torch.enable_grad():
        outputs = attention_head(weights, *(leaves[names[i]] for i in range(3)), attn_mask)
        grads = _vjp(outputs, cotangents, [*leaves.values(), *weights.values()])
    return dict(zip([*leaves, *weights], grads))


def mha_gradients(params: dict[str, Tensor | None], embed_dim: int, num_heads: int,
                  kdim: int | None, vdim: int | None, inputs: tuple[Tensor, Tensor, Tensor],
                  names: dict[int, str], attn_mask: Tensor | None,
                  cotangents: tuple[Tensor, ...]) -> dict[str, Tensor | None]:
    """Autograd through `nn.MultiheadAttention` holding `params` (`torch_mha`): the gradients
    of the inputs by `names` (one name for query, key and value in self-attention: one tensor
    passed three times, as in real use), then those of the weights in the fused naming
    (q_proj.weight, ..., out_proj.bias; a packed in_proj split in three)."""
    mha = torch_mha(params, embed_dim, num_heads, kdim, vdim)
    leaves = _leaves(inputs, names)
    named = dict(mha.named_parameters())
    with torch.enable_grad():
        outputs = mha(*(leaves[names[i]] for i in range(3)), attn_mask=attn_mask,
                      need_weights=True, average_attn_weights=False)
        grads = _vjp(outputs, cotangents, [*leaves.values(), *named.values()])
    found = dict(zip([*leaves, *named], grads))
    result = {name: found[name] for name in leaves}
    for kind in ("weight", "bias"):
        packed = found.get(f"in_proj_{kind}")
        parts = packed.chunk(3) if packed is not None else [
            found.get(f"{n}_proj_{kind}") for n in "qkv"]
        for n, part in zip("qkv", parts):
            result[f"{n}_proj.{kind}"] = part
        result[f"out_proj.{kind}"] = found.get(f"out_proj.{kind}")
    return {k: v for k, v in result.items() if k in leaves or params.get(k) is not None}
