"""English templates of the checks (`mha_kit.checks`): verdicts, what is compared, case labels,
shapes, values and masks. Ids are `area.name`; see `messages` for the fields."""

TEMPLATES: dict[str, str] = {
    # How a verdict is put together (checks.core.CheckFailed)
    "check.mistake": "{mistake} {text}",
    "check.case": "{text} ({case})",
    "check.drawing": "{text}\n{drawing}",
    "check.warned": "{warned}. {text}",
    "check.what": "{what}: {detail}",

    # What is compared: the `what` of expect_*
    "what.attention_weights": "{name} attention weights",
    "what.output": "{name} output",

    # Case labels (checks.inputs and literal cases)
    "case.non_contiguous_input": "non-contiguous input",
    "case.non_contiguous_inputs": "non-contiguous inputs",
    "case.non_contiguous_x": "non-contiguous x",
    "case.no_mask": "no mask",
    "case.causal_mask": "causal mask (T, T)",
    "case.random_mask": "random mask (Tq, Tk)",
    "case.padding_mask": "padding mask (B, 1, 1, Tk)",
    "case.causal_kind": "causal",
    "case.random_kind": "random",
    "case.attn_mask_kind": "{kind} attn_mask",
    "case.large_logits": "logits around 1e3",
    "case.without_bias": "without bias",
    "case.searched": "{case}; the smallest failing case of a shape search",
    "case.eval_dropout": "dropout={p:g} in eval mode",
    "case.dropped_out": "{case}: out must use the dropped-out weights",

    # Several causes in one check (checks.causes): each told by what its cases share
    "cause.several": "{count} different problems: {causes}",
    "cause.item": "({n}) {text}",
    "cause.item_on": "({n}) with {where}: {text}",
    "cause.on": "With {where}: {text}",  # the one cause, and the kind of case it happens on
    "cause.then": "{first} {second}",
    # A NotImplementedError where other cases run: told as any error is, with its line and text
    "cause.not_implemented": "{raised}",
    "cause.not_implemented_in_check": "{raised} (it runs in other checks, not in this one)",
    "cause.not_implemented_here": "{raised} (on every case of this check: {cases}; it runs in "
                                  "other checks)",
    # The kinds of case, as `with {where}` says them: in the words of the contract
    "trait.cross": "cross-attention (key and value other than the query)",
    "trait.self": "self-attention (key = value = query)",
    "trait.attn_mask": "`attn_mask`",
    "trait.no_attn_mask": "attn_mask=None",
    "trait.is_causal": "`is_causal=True`",
    "trait.not_causal": "is_causal=False",
    "trait.masked": "a mask (`attn_mask` or `is_causal=True`)",
    "trait.bias": "a bias",
    "trait.no_bias": "`bias=False`",
    "trait.bias_none": "bias=None",
    "trait.square": "a square weight (in = out features)",
    "trait.not_square": "a non-square weight (in ≠ out features)",
    "trait.contiguous": "contiguous inputs",
    "trait.usual_logits": "logits of usual size",
    "trait.dtype": "{dtype} inputs",

    # Type, dtype and device (checks.expect)
    "tensor.not_tensor": "should be a tensor of shape {shape}, got {type}",
    "tensor.bool_dtype": "has dtype {dtype}, expected torch.bool (True = blocked): build it with "
                         "dtype=torch.bool or finish with .bool()",
    "tensor.dtype": "has dtype {dtype} for {expected} inputs: keep the input's dtype (avoid "
                    "torch.tensor(...) constants that force float32)",
    "tensor.device": "is on {device} but the inputs are on {expected}: create new tensors with "
                     "device=x.device",
    "check.in_place": "`{name}` modified its input `{input}` in place: use out-of-place ops "
                      "(masked_fill rather than masked_fill_, x = x * s rather than x *= s, "
                      "m = m | c rather than m |= c, torch.where rather than x[index] = value)",
    "check.not_pair": "`{name}` should return a pair (out, weights), got {type}",
    "check.no_value_error": "{call} should raise ValueError: {why}",
    "check.other_error": "{call} should raise ValueError ({why}), but: {error}",

    # Shapes (checks.feedback)
    "shape.wrong": "got shape {got}, expected {expected}: {cause}",
    "shape.wrong_named": "got shape {got}, expected {expected} = {dims}: {cause}",
    "shape.dim": "dim {i}",
    "shape.dims": "({dims})",
    "shape.transposed": "that looks like {yours}: did you forget to transpose {a} and {b}?",
    "shape.permuted": "that looks like {yours}: check the order in your permute",
    "shape.size": "{dim} is {got} instead of {expected}",
    "shape.flattened": "{a} and {b} are flattened into one dim",
    "shape.split": "{dim} is split into two dims ({a}, {b})",
    "shape.missing": "the {dim} dim is missing",
    "shape.missing_index": "{dim} is missing",
    "shape.wrong_bare": "got shape {got}, expected {expected}",
    "shape.wrong_named_bare": "got shape {got}, expected {expected} = {dims}",
    "shape.ndim": "{got} dims instead of {expected}",

    # Values (checks.feedback)
    "values.wrong": "wrong values: at index {index} expected {expected:.6g}, got {got:.6g} (max "
                    "abs error {error:.3g})",
    "values.wrong_heads": "wrong values: at index {index} expected {expected:.6g}, got {got:.6g} "
                          "(max abs error {error:.3g}); heads {heads} of {count} differ",
    "nonfinite.nan_rows": "NaN in your result (first at {first}) on whole rows: a softmax row is "
                          "all NaN when it divides 0 by 0 (every key blocked: every query here "
                          "keeps at least one, so check that your mask is not inverted or "
                          "shifted; or weights renormalised after masking, whose allowed keys "
                          "all underflowed to 0 on large logits: mask before the softmax) or inf "
                          "by inf (exp overflowing on large logits: use torch.softmax)",
    "nonfinite.nan": "NaN in your result (first at {first}) where the expected values are "
                     "finite: either 0 * inf (multiplying -inf scores by a 0/1 mask; use "
                     "masked_fill), or exp overflowing in a softmax written by hand (use "
                     "torch.softmax)",
    "nonfinite.inf": "inf in your result (first at {first}) where the expected values are "
                     "finite: exp overflows above about 709 in float64 (88 in float32), and -inf "
                     "must only fill scores before the softmax, never reach the weights or the "
                     "output",

    # Masks (checks.feedback)
    "mask.yours": "yours",
    "mask.expected": "expected",
    "mask.header": "{yours:<{width}}   {expected:<{width}}   (x = blocked, . = allowed; row i = "
                   "query i)",
    "mask.drawing": "    {header}\n{rows}",  # rows: the drawn masks, as they are
    "mask.drawing_corner": "    {header}\n{rows}\n    {corner}",
    "mask.corner": "(the top-left {n}x{n} corner of {shape})",
    "mask.wrong_entries": "{wrong} of {total} entries wrong, the first at {first}",
    "attend.blocked_nonzero": ("{what}: blocked positions must be exactly 0: fill the blocked "
                               "scores with float('-inf') before the softmax (a finite fill such "
                               "as -15 still gives them a little weight)"),

    # Dropout (checks.expect)
    "dropout.none_dropped": "dropout={p:g} in training mode dropped no attention weight: apply "
                            "nn.Dropout to the weights (it is active only in train())",
    "dropout.not_used": "dropout in training mode: the weights you return should be the ones "
                        "you used, each either 0 or softmax / (1 - p)",
    "dropout.weights_not_returned": "dropout={p:g} in training mode changed the output, but "
                                    "not through the weights you return (none is dropped): "
                                    "apply dropout to the attention weights after the "
                                    "softmax, multiply v by them, and return them",
    "dropout.in_eval": "`{name}` drops attention weights in eval mode (dropout={p:g}): dropout "
                       "acts in training mode only: use nn.Dropout, or pass "
                       "training=self.training to F.dropout, which drops unless told",
    "dropout.on_output": "dropout={p:g} in training mode drops entries of the output: "
                         "nn.MultiheadAttention applies dropout to the attention weights only, "
                         "never after out_proj",
}
