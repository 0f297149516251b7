"""Attention as today's language models run it: rotary position embeddings, grouped-query
attention, the KV cache, a sliding-window mask and FlashAttention's online softmax."""
