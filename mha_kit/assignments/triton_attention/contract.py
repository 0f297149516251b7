"""The names a triton_attention submission defines (solutions/triton_attention)."""

from ...catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry("triton_softmax", "triton_softmax(x)"),
    Entry("flash_forward", "flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16)"),
    Entry("flash_attention_triton",
          "flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16)"),
)
