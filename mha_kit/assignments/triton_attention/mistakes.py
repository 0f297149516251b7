"""The known mistakes of triton_attention, by id (their sentences: `mistake.<id>` in
messages.py; their recomputations: variants.py, and the causal work count in forward.py)."""

CATALOGUE: tuple[str, ...] = (
    # the row softmax
    "triton_softmax_other_zero", "triton_softmax_no_max",
    # the forward kernel
    "triton_acc_not_rescaled", "triton_sum_not_rescaled", "triton_boundary_other_zero",
    "triton_scale_missing", "triton_lse_not_stored", "triton_lse_without_max",
    "triton_strides_contiguous",
    # its causal loop bound
    "triton_causal_bound_short", "triton_causal_bound_long", "triton_causal_not_skipped",
    # the backward
    "triton_delta_missing",
)
