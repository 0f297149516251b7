"""FlashAttention-2 in Triton: a fused row-softmax kernel as a warm-up, then the forward
kernel (tiled over queries, an online softmax over key blocks, the logsumexp stored, causal
blocks above the diagonal skipped) with its launcher, and the backward (the δ pre-pass, dK and
dV, dQ) behind a `torch.autograd.Function`. Graded on any machine: on the CPU through Triton's
interpreter (TRITON_INTERPRET=1), compiled on a GPU."""
