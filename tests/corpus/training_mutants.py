"""Submissions that give the right forward values but cannot be trained, would crash on the
first GPU, or change the caller's tensors: each one exact text edit of template.py, with the
checks it must fail (a step function's own check alone: the modules that call it are graded
with the kit's version).

`kind` is "gradient" (the failing messages are gradient messages, ids `grad.*`), "device"
(the device message, `device.*`) or "in_place" (`check.in_place`): never a message about
forward values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).with_name("template.py")

# A step's mistake costs its own check: the modules that call it get the kit's version.
FUSED = frozenset({"fused_mha", "fused_mha_masks"})  # the contract check is forward only
BOTH_MASKS = frozenset({"fused_mha_masks", "looped_mha"})  # _combined_mask, which both use


@dataclass(frozen=True)
class Broken:
    label: str
    kind: str  # "gradient", "device" or "in_place"
    old: str
    new: str
    fails: frozenset[str]

    def source(self) -> str:
        """template.py with the edit applied; the old text must occur exactly once."""
        text = TEMPLATE.read_text()
        count = text.count(self.old)
        assert count == 1, f"{self.label}: the old text occurs {count} times in template.py"
        return text.replace(self.old, self.new)


_SOFTMAX = "    weights = F.softmax(scores, dim=-1)\n    return torch.matmul(weights, v), weights"
_FUSED_WEIGHTS = "        weights = self.dropout(F.softmax(scores, dim=-1))"
_MERGE = "x.permute(0, 2, 1, 3).reshape(b, t, h * d)"

TRAINING: tuple[Broken, ...] = (
    Broken("attend detaches the scores before the softmax", "gradient",
           "    weights = F.softmax(scores, dim=-1)\n",
           "    weights = F.softmax(scores.detach(), dim=-1)\n",
           frozenset({"attend"})),
    Broken("output_projection reads weight.data", "gradient",
           "torch.matmul(x, weight.t())", "torch.matmul(x, weight.data.t())",
           frozenset({"output_projection"})),
    Broken("the fused forward runs under torch.no_grad()", "gradient",
           "        self.dropout = nn.Dropout(dropout)\n\n    def forward(",
           "        self.dropout = nn.Dropout(dropout)\n\n    @torch.no_grad()\n    def forward(",
           FUSED),
    Broken("merge_heads round-trips through numpy", "gradient",
           _MERGE, "torch.from_numpy(x.detach().numpy()).permute(0, 2, 1, 3).reshape(b, t, h * d)",
           frozenset({"merge_heads"})),
    Broken("attend zeroes the blocked weights with masked_fill_ after the softmax", "gradient",
           _SOFTMAX,
           "    weights = F.softmax(scores, dim=-1)\n    if mask is not None:\n"
           "        weights.masked_fill_(mask, 0.0)\n    return torch.matmul(weights, v), weights",
           frozenset({"attend"})),
    # and three more of our own
    Broken("split_heads re-wraps its result with torch.tensor", "gradient",
           "return x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)",
           "return torch.tensor(x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3))",
           frozenset({"split_heads"})),
    Broken("the fused module detaches the output of out_proj", "gradient",
           "self.out_proj(merge_heads(torch.matmul(weights, v)))",
           "self.out_proj(merge_heads(torch.matmul(weights, v))).detach()",
           FUSED),
    Broken("the fused module computes the weights under torch.no_grad()", "gradient",
           _FUSED_WEIGHTS, "        with torch.no_grad():\n    " + _FUSED_WEIGHTS,
           FUSED),
    Broken("attend's hand-written softmax normalises in place (/=)", "gradient",
           _SOFTMAX,
           "    weights = (scores - scores.amax(dim=-1, keepdim=True)).exp()\n"
           "    weights /= weights.sum(dim=-1, keepdim=True)\n"
           "    return torch.matmul(weights, v), weights",
           frozenset({"attend"})),
    Broken("merge_heads calls .numpy() on its input", "gradient",
           _MERGE, "torch.from_numpy(x.numpy()).permute(0, 2, 1, 3).reshape(b, t, h * d)",
           frozenset({"merge_heads"})),
)

DEVICES: tuple[Broken, ...] = (
    Broken("the module builds the causal mask on the CPU in forward", "device",
           "    causal = causal_mask(tq, device=device)", "    causal = causal_mask(tq)",
           BOTH_MASKS),
    Broken("scaled_scores keeps the scale in a shape-(1,) CPU tensor", "device",
           "torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])",
           "torch.matmul(q, k.transpose(-2, -1)) / torch.sqrt(torch.Tensor([q.shape[-1]]))",
           frozenset({"scaled_scores"})),
    Broken("output_projection makes a zero bias with torch.zeros and no device", "device",
           "    if bias is not None:\n        out = out + bias\n    return out",
           "    if bias is None:\n        bias = torch.zeros(weight.shape[0], dtype=x.dtype)\n"
           "    return out + bias",
           frozenset({"output_projection"})),
    Broken("causal_mask ignores its device argument", "device",
           "torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)",
           "torch.ones(seq_len, seq_len, dtype=torch.bool)",
           frozenset({"causal_mask"})),
)

IN_PLACE: tuple[Broken, ...] = (
    Broken("the module ors the causal mask into the caller's attn_mask (|=)", "in_place",
           "    return causal if attn_mask is None else attn_mask | causal",
           "    if attn_mask is None:\n        return causal\n    attn_mask |= causal\n"
           "    return attn_mask",
           BOTH_MASKS),
)
