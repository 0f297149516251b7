"""Forbidden-API routes: template.py whose fused module takes its output from the attention
kernel that `F.scaled_dot_product_attention` runs, reached by another entry point than
`torch.nn.functional` (its weights are still computed by hand, so that only the route differs).

Each must lose every check whose code runs the route, with the forbidden-API message naming
the API a student knows (`api`): `F.scaled_dot_product_attention`, or `nn.MultiheadAttention`
for the native kernels of whole attention layers, which run their attention below the
dispatcher's Python key (red team n11).
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
    api: str = "F.scaled_dot_product_attention"  # the name the forbidden-API message gives
    gradients: bool = True  # False: the kernel has no backward (forward values only)

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
# The native kernels of a whole layer take one sequence for query, key and value: the queries,
# then the keys with their values, each head's features [q | k | v | spare], the spare making
# each token's mean 0 (so that a layer norm of eps 1e30 and weight 1e15 is the identity). The
# in-projection picks each part (q scaled for the wider head), the mask keeps queries on the
# keys they may see; the context is in each head's first D features of the query rows.
_PACKED = '''def _packed(q, k, v, allowed):
    (B, H, Tq, D), Tk = q.shape, k.shape[2]
    P, L = 3 * D + 1, Tq + Tk
    x = q.new_zeros(B, L, H, P)
    x[:, :Tq, :, :D] = q.transpose(1, 2)
    x[:, Tq:, :, D:2 * D] = k.transpose(1, 2)
    x[:, Tq:, :, 2 * D:3 * D] = v.transpose(1, 2)
    x = x.flatten(2)
    x[..., -1] = -x.sum(-1)
    pick = q.new_zeros(3, H, P, H, P)
    for part, scale in enumerate((math.sqrt(P / D), 1.0, 1.0)):
        for h in range(H):
            pick[part, h, :D, h, part * D:(part + 1) * D] = torch.eye(D, dtype=q.dtype) * scale
    masked = torch.zeros(B, H, L, L, dtype=torch.bool, device=q.device)
    masked[:, :, :Tq, :Tq] = True
    if allowed is not None:
        masked[:, :, :Tq, Tq:] = ~allowed
    return x, pick.view(3 * H * P, H * P), masked


def _context(y, q):
    (B, H, Tq, D) = q.shape
    return y[:, :Tq].reshape(B, Tq, H, -1)[..., :D].transpose(1, 2)


'''
_LAYER = ("x, pick, masked = _packed(q, k, v, allowed)\n"
          "n, zeros = x.shape[-1], x.new_zeros(x.shape[-1])\n")
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
    Route("nn.MultiheadAttention's native kernel", _LAYER + "context = _context(torch."
          "_native_multi_head_attention(x, x, x, n, q.shape[1], pick, x.new_zeros(3 * n),\n"
          "    torch.eye(n, dtype=x.dtype), zeros, masked, False, True, 2)[0], q)",
          prelude=_PACKED, api="nn.MultiheadAttention", gradients=False),
    # nn.TransformerEncoderLayer's fast path, norm first: x + attention(norm(x)), then a zero
    # feed-forward; the residual is subtracted (red team n11)
    Route("nn.TransformerEncoderLayer's native kernel", _LAYER + "ones = x.new_full((n,), 1e15)\n"
          "context = _context(torch._transformer_encoder_layer_fwd(\n"
          "    x, n, q.shape[1], pick, x.new_zeros(3 * n), torch.eye(n, dtype=x.dtype), zeros,\n"
          "    False, True, 1e30, ones, zeros, ones, zeros, x.new_zeros(1, n), x.new_zeros(1),\n"
          "    x.new_zeros(n, 1), zeros, masked, 2) - x, q)",
          prelude=_PACKED, api="nn.MultiheadAttention", gradients=False),
)
