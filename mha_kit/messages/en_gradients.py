"""English templates of the gradient and device checks (`checks.gradients`, `runner.backward`,
`runner.devices`): why a layer cannot be trained, or would not run on a GPU. `{error}` holds
PyTorch's own text, `{code}` a line of the student's and `{fix}` its out-of-place form."""

TEMPLATES: dict[str, str] = {
    # Gradients (runner.backward, checks.gradients)
    "grad.detached": "the output of `{name}` has no grad_fn although its inputs require grad: "
                     "it is cut off from the autograd graph, so nothing before it can be "
                     "trained. Look for `.detach()`, `.data`, `torch.no_grad()`, `.numpy()` or "
                     "`torch.tensor(x)` between the inputs and the output",
    "grad.detached_part": "`{output}` from `{name}` has no grad_fn although the inputs require "
                          "grad: it is cut off from the autograd graph, so nothing before it "
                          "can be trained. Look for `.detach()`, `.data`, `torch.no_grad()`, "
                          "`.numpy()` or `torch.tensor(x)` on the way to `{output}`",
    "grad.needs_no_grad": "`{name}` works only with autograd off: on inputs that require grad "
                          "it raises `{error}`. Keep every step in torch, on the tensors you "
                          "were given (no `.numpy()`, no `.data`), so that gradients can flow",
    "grad.none": "{what} is None although the output depends on it: on the way it is used "
                 "outside the autograd graph (`.data`, `.detach()`, `torch.no_grad()`, "
                 "`.numpy()`)",
    "grad.none_param": "{what} is None although the output depends on it: it is used outside "
                       "the autograd graph (`.data`, `.detach()`, `torch.no_grad()`), or it is "
                       "not an nn.Parameter that requires grad",
    "grad.zero": "{what} is all zeros although the output depends on it: look for "
                 "`.detach()` or `.data` where it is used",
    "grad.of_input": "the gradient of `{name}` with respect to its input `{input}`",
    "grad.of_param": "the gradient of `{name}` with respect to `{param}`",
    "grad.inplace": "backward() fails: `{code}`{where} changes in place a tensor that autograd "
                    "saved for the backward pass ({error}). Write `{fix}` instead: an "
                    "out-of-place op leaves the saved tensor as it was",
    "grad.inplace_clone": "backward() fails: `{code}`{where} changes in place a tensor that "
                          "autograd saved for the backward pass ({error}). Write `{fix}` just "
                          "before it, so that the saved tensor stays as it was, or build the "
                          "result out of place (`torch.where`, `masked_fill`)",
    "grad.inplace_unknown": "backward() through `{name}` fails: a tensor that autograd saved "
                            "for the backward pass was changed in place ({error}). Look for "
                            "in-place ops (`masked_fill_`, `exp_`, `+=`, `*=`, `x[...] = ...`) "
                            "and write them out of place: `x = x.masked_fill(mask, value)`, "
                            "`x = x * s`",
    "grad.at_line": " (line {line}{cell})",
    "grad.raised": "backward() through `{name}` raised {type}: {error}",
    "grad.gradient_count": "backward() through `{name}` raised {type}: {error}. A custom "
                           "autograd.Function's backward returns one value for each argument "
                           "of its forward after ctx, {expected} here: the gradient of each "
                           "tensor input, and None for every other argument (a flag, a block "
                           "size). Yours returned {got}",
    "grad.missing": "`{name}` gave the right values but no gradients came back",
    "case.backward": "{case}; backward of the outputs times random weights",

    # Devices (runner.devices, checks.gradients)
    "device.cpu_tensor": "`{name}` creates a tensor on cpu while the input is on meta (a GPU "
                         "in real use){where}: create it with device=x.device",
    "device.where": ", at line {line}{cell}",
    "device.where_code": ", at line {line}{cell}: `{code}`",
    "device.output": "`{name}` returns a tensor on {device} while the input is on meta (a GPU "
                     "in real use): create it with device=x.device",
    "device.output_argument": "`{name}` returns a tensor on {device} when called with "
                              "device=meta (a GPU in real use): create it on the device it is "
                              "given (device=device)",
    "case.meta": "{case}, inputs and weights on the meta device",
}
