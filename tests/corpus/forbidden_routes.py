"""Forbidden-API routes: template.py whose fused module takes its output from the attention
kernel that `F.scaled_dot_product_attention` runs, reached by another entry point than
`torch.nn.functional` (its weights are still computed by hand, so that only the route differs).

Each must lose every check whose code runs the route, with the forbidden-API message naming
`F.scaled_dot_product_attention`, the name a student knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).with_name("template.py")
OUTPUT = "        out = self.out_proj(merge_heads(torch.matmul(weights, v)))\n"
# the fused module's checks; the speed check waits for the first two
FAILS = frozenset({"fused_mha", "fused_mha_masks", "fused_mha_contract"})


@dataclass(frozen=True)
class Route:
    label: str
    code: str  # computes `context` (B, H, Tq, D) from q, k, v and `allowed` (True = allowed)
    prelude: str = ""  # added after the template's imports

    def source(self) -> str:
        text = TEMPLATE.read_text()
        assert text.count(OUTPUT) == 1
        body = ("        allowed = None if mask is None else ~mask\n"
                + "".join(f"        {line}\n" for line in self.code.splitlines())
                + "        out = self.out_proj(merge_heads(context))\n")
        text = text.replace("\ndef split_heads", f"\n{self.prelude}def split_heads", 1)
        return text.replace(OUTPUT, body)


# The kernels take the mask as an additive bias (the wrapper converts a bool mask first).
_BIAS = ("bias = None if allowed is None else torch.zeros(\n"
         "    allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed, -math.inf)\n")
ROUTES: tuple[Route, ...] = (
    Route("the C binding, torch._C._nn", "context = torch._C._nn.scaled_dot_product_attention("
          "q, k, v, attn_mask=allowed)"),
    Route("the ATen op, torch.ops.aten", "context = torch.ops.aten.scaled_dot_product_attention("
          "q, k, v, attn_mask=allowed)"),
    Route("the ATen overload, .default", "context = torch.ops.aten.scaled_dot_product_attention"
          ".default(q, k, v, allowed)"),
    Route("the math kernel", _BIAS + "context = torch.ops.aten._scaled_dot_product_attention_math("
          "q, k, v, bias)[0]"),
    Route("the CPU flash kernel", _BIAS + "context = torch.ops.aten."
          "_scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=bias)[0]"),
    Route("a TorchScript function", "context = _scripted(q, k, v, allowed)",
          prelude="import typing\n\n\n@torch.jit.script\n"
          "def _scripted(q, k, v, allowed: typing.Optional[torch.Tensor]):\n"
          "    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)\n\n\n"),
    Route("torch's function modes switched off", "with torch._C.DisableTorchFunction():\n"
          "    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, "
          "attn_mask=allowed)"),
    # The math path is what a GPU runs for float64 (its fused kernels take no float64): it
    # decomposes into ordinary ops before the dispatcher, but for one, `_safe_softmax`.
    Route("the math path, hidden", "with torch.nn.attention.sdpa_kernel(\n"
          "        torch.nn.attention.SDPBackend.MATH), torch._C.DisableTorchFunction():\n"
          "    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, "
          "attn_mask=allowed)"),
)
