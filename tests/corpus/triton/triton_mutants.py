"""Single-mistake submissions of triton_attention: each is reference.py with one mistake made
(one or a few exact text edits), labelled with what the grader must say; and alternative
correct answers made the same way, which must get every point.

`fails` is the exact set of checks the mistake must fail; `named` the ids the grader must
name: a mistake of `mistakes.py`, or the id of the message that says what is wrong where no
value is (what the Function saves, softmax computed by PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).with_name("reference.py")

SOFTMAX = frozenset({"triton_softmax"})
CAUSAL = frozenset({"triton_flash_causal"})
STRIDES = frozenset({"triton_flash_strides"})
BACKWARD = frozenset({"triton_flash_backward"})
# A forward mistake costs every check of flash_forward's values; the backward is graded with
# the kit's flash_forward in its place (CheckSpec.stand_ins).
FORWARD_VALUES = frozenset({"triton_flash_forward", "triton_flash_causal",
                            "triton_flash_strides"})
NOT_CAUSAL = frozenset({"triton_flash_forward", "triton_flash_strides"})

_FWD_BOUND = ("hi = tl.minimum(Tk, (start_m + 1) * BLOCK_M + offset)\n"
              "    for start_n in range(0, hi, BLOCK_N):\n"
              "        cols = start_n + offs_n\n"
              "        k = tl.load(k_ptr + b")
_DELTA = "ds = p * (dp - delta[:, None])"


@dataclass(frozen=True)
class Mutant:
    label: str
    edits: tuple[tuple[str, str], ...]
    fails: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()

    def source(self) -> str:
        """reference.py with the edits made; each old text occurs there exactly `count` times
        (once, or every time for an edit marked with a count)."""
        text = REFERENCE.read_text()
        for old, new in self.edits:
            assert old in text, f"{self.label}: {old!r} is not in reference.py"
            text = text.replace(old, new)
        return text


def _one(label: str, old: str, new: str, fails: frozenset[str], *named: str) -> Mutant:
    return Mutant(label, ((old, new),), fails, frozenset(named))


MUTANTS: tuple[Mutant, ...] = (
    # the row softmax
    _one("softmax: the padding lanes loaded as 0", 'mask=inside, other=-float("inf"))',
         "mask=inside, other=0.0)", SOFTMAX, "triton_softmax_other_zero"),
    _one("softmax: exp without the maximum", "    x = x - tl.max(x, axis=0)\n", "", SOFTMAX,
         "triton_softmax_no_max"),
    _one("softmax: rows assumed n_cols apart", "row * x_row_stride + cols",
         "row * n_cols + cols", SOFTMAX),
    _one("softmax: the launcher calls torch.softmax", "    return out\n\n\n@triton.jit\ndef flash",
         "    return torch.softmax(x, dim=-1)\n\n\n@triton.jit\ndef flash", SOFTMAX,
         "triton.torch_computes"),
    # the forward kernel
    _one("the accumulator not rescaled", "acc = acc * alpha[:, None] + tl.dot(",
         "acc = acc + tl.dot(", FORWARD_VALUES, "triton_acc_not_rescaled"),
    _one("the running sum not rescaled", "l_i = l_i * alpha + tl.sum(p, axis=1)",
         "l_i = l_i + tl.sum(p, axis=1)", FORWARD_VALUES, "triton_sum_not_rescaled"),
    _one("no 1/sqrt(D)", "s = tl.dot(q, tl.trans(k)) * scale\n        keep = cols",
         "s = tl.dot(q, tl.trans(k))\n        keep = cols", FORWARD_VALUES,
         "triton_scale_missing"),
    _one("keys past Tk not masked", "keep = cols[None, :] < Tk", "keep = cols[None, :] >= 0",
         NOT_CAUSAL, "triton_boundary_other_zero"),
    _one("the logsumexp not stored",
         "    tl.store(lse_ptr + bh * Tq + offs_m, m_i + tl.log(l_i), mask=offs_m < Tq)\n", "",
         FORWARD_VALUES, "triton_lse_not_stored"),
    _one("the logsumexp without the maximum", "m_i + tl.log(l_i), mask=offs_m < Tq)",
         "tl.log(l_i), mask=offs_m < Tq)", FORWARD_VALUES, "triton_lse_without_max"),
    _one("strides assumed contiguous",
         "*q.stride(), *k.stride(), *v.stride(),\n                           *out.stride(),",
         "H * Tq * D, Tq * D, D, 1, H * Tk * D, Tk * D, D, 1, H * Tk * D, Tk * D, D, 1,\n"
         "                           H * Tq * D, Tq * D, D, 1,", STRIDES,
         "triton_strides_contiguous"),
    _one("the launcher makes the causal mask", "    grid = (triton.cdiv(Tq, block_m), B * H)\n",
         "    grid = (triton.cdiv(Tq, block_m), B * H)\n"
         "    blocked = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).triu(Tk - Tq + 1)\n",
         frozenset({"triton_flash_forward"}), "triton.full_matrix"),
    # the causal loop bound
    _one("the causal bound one block short", _FWD_BOUND,
         _FWD_BOUND.replace("(start_m + 1) * BLOCK_M", "start_m * BLOCK_M"), CAUSAL,
         "triton_causal_bound_short"),
    _one("the causal bound one block long", _FWD_BOUND,
         _FWD_BOUND.replace("BLOCK_M + offset)", "BLOCK_M + offset + BLOCK_N)"), CAUSAL,
         "triton_causal_bound_long"),
    _one("no causal block skipped", _FWD_BOUND,
         _FWD_BOUND.replace("tl.minimum(Tk, (start_m + 1) * BLOCK_M + offset)", "Tk"), CAUSAL,
         "triton_causal_not_skipped"),
    # the backward
    _one("δ left out of the backward", _DELTA, "ds = p * dp", BACKWARD,
         "triton_delta_missing"),
    Mutant("the Function saves the probabilities", (
        ("ctx.save_for_backward(q, k, v, out, lse)",
         "ctx.save_for_backward(q, k, v, out, lse, torch.zeros(*q.shape[:3], k.shape[2]))"),
        ("q, k, v, out, lse = ctx.saved_tensors", "q, k, v, out, lse = ctx.saved_tensors[:5]"),
    ), BACKWARD, frozenset({"triton.saves_too_much"})),
    _one("no autograd.Function", "return FlashAttentionTriton.apply(q, k, v, is_causal, "
         "block_m, block_n)", "return flash_forward(q, k, v, is_causal, block_m, block_n)[0]",
         BACKWARD, "triton.no_graph"),
)

# Correct in another way: each must get every point, with no diagnosis.
ALTERNATIVES: tuple[Mutant, ...] = (
    Mutant("exp2 with log2(e) folded into the scale, as Triton's tutorial", (
        ("s = tl.dot(q, tl.trans(k)) * scale\n        keep = cols",
         "s = tl.dot(q, tl.trans(k)) * (scale * 1.4426950408889634)\n        keep = cols"),
        ("p = tl.exp(s - m_safe[:, None])\n        alpha = tl.exp(m_i - m_safe)",
         "p = tl.math.exp2(s - m_safe[:, None])\n        alpha = tl.math.exp2(m_i - m_safe)"),
        ("m_i + tl.log(l_i), mask=offs_m < Tq)",
         "(m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=offs_m < Tq)"),
    )),
    Mutant("the row softmax over column chunks, with a running maximum", (
        ("""    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)""",
         """    m = -float("inf")
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols,
                    other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * out_row_stride + cols, tl.exp(x - m) / total,
                 mask=cols < n_cols)"""),
        ("BLOCK=triton.next_power_of_2(cols))", "BLOCK=16)"),
    )),
    Mutant("larger default blocks and the launcher's own copies made contiguous", (
        ("def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):",
         "def flash_forward(q, k, v, is_causal=False, block_m=64, block_n=32):"),
        ("    B, H, Tq, D = q.shape\n    Tk = k.shape[2]\n    out = torch.empty_like(q)",
         "    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()\n"
         "    B, H, Tq, D = q.shape\n    Tk = k.shape[2]\n    out = torch.empty_like(q)"),
    )),
)
