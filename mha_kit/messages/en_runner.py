"""English templates of the runner (`mha_kit.runner`): what student code did wrong, loading
problems, and the worker's timeouts, crashes and caps. `{error}` and `{text}` hold text that
comes from the student's code or from Python, shown as it is."""

TEMPLATES: dict[str, str] = {
    # Calling student code (runner.inprocess)
    "runner.not_implemented": "`{name}` is not implemented yet",
    "runner.missing": "`{name}` is not defined: expected {signature}",
    "runner.missing_after_problems": "`{name}` is not defined: expected {signature} (and your "
                                     "file had problems loading: see below)",
    "runner.at_line": ", line {line}{cell}",
    "line.cell": " of the cell that defines `{function}`",
    "runner.refused_threads": "`{name}` starts a thread{line}: graded code may not (the "
                              "grader watches the torch calls of the thread it calls your code "
                              "on; a ThreadPoolExecutor, a DataLoader's pin-memory thread). "
                              "Compute on the thread you are called on",
    "runner.refused_processes": "`{name}` starts a process or a session{line} (os.fork, "
                                "multiprocessing, a DataLoader with workers, os.setsid): graded "
                                "code may not. Compute in the process you are called in",
    "runner.raised": "`{name}` raised {type}{line}",
    "runner.raised_text": "`{name}` raised {type}{line}: {error}",
    "runner.float32_overflow": "{raised}. A float64 value was written into a float32 tensor: "
                               "the grader also calls your code on float64 inputs, and a "
                               "tensor made without their dtype is float32 (torch.zeros(...), "
                               "torch.full(...) or torch.tensor(...) without dtype=, or a "
                               ".float() cast). Make it with the inputs' dtype: dtype=x.dtype, "
                               "or x.new_full(...)",
    "runner.float32_meets_float64": "{raised}. A float32 tensor met a float64 one: the "
                                    "grader also calls your code on float64 inputs, and a "
                                    "tensor cast to float32 (.float(), .to(torch.float32), "
                                    "softmax(..., dtype=torch.float32)) stays float32. Cast "
                                    "it back before it meets the inputs: .to(x.dtype) or "
                                    ".type_as(x)",
    "runner.view_not_contiguous": "{raised}. .view reuses a tensor's memory, so it needs "
                                  "strides that give the new shape, and a tensor after "
                                  ".transpose, .permute or .expand has others (heads merged "
                                  "by .view(B, T, E) after .transpose(1, 2), say). Use "
                                  ".reshape, which copies when it must, or .contiguous().view",
    "runner.device_mix": "{raised}. A tensor created without device=x.device "
                         "(torch.zeros(shape), torch.arange(n), torch.tensor(...)) is on the "
                         "CPU while the inputs are not (the device check puts them on "
                         "meta; a GPU in real use). Create it on the inputs' device: "
                         "device=x.device, or torch.zeros_like(x), x.new_zeros(...)",
    "runner.out_of_memory": "`{name}` ran out of memory{size}{limit}: tensors the size of the "
                            "inputs are all this exercise needs",
    "runner.asked_for": " (it asked for {gib:,.1f} GiB at once)",
    "runner.memory_limit": "; the grader allows {gib:g} GiB",
    "runner.kit_code": "`{name}` has the grader's own code compute for it ({function}): "
                       "points are earned by your code, not by the kit's. Write it yourself",
    "runner.kit_read": "`{name}` read the grading kit's own file {path}: graded code may not "
                       "read the kit's files; write the code yourself",
    "runner.forbidden": "`{name}` uses {api}, which this exercise asks you to write yourself: "
                        "graded code may not call it",
    "runner.bad_layout": "`{name}` returned a {layout} tensor on {device}; return an ordinary "
                         "dense tensor",
    "runner.subclass": "`{name}` returned a tensor subclass, {type}; return a plain torch.Tensor",
    "runner.too_deep": "`{name}` returned lists or tuples nested too deeply; return a "
                       "torch.Tensor",
    "runner.bad_type": "`{name}` returned a value of type {type}; return a torch.Tensor",
    "runner.not_module": "`{name}(...)` is not an nn.Module",
    "runner.no_submodule": "`{owner}` has no submodule `{holder}`: the grader reads and writes "
                           "weights through it ({signature})",
    "runner.not_none": "`{owner}.{param}` should be None when bias=False",
    "runner.no_param": "`{owner}.{param}` is missing: expected a parameter of shape {shape}",
    "runner.param_shape": "`{owner}.{param}` has shape {got}, expected {expected}",

    # Loading the file (runner.loading)
    "load.cell_defining": "the cell defining `{name}`",
    "load.cell_ran": "the cell In [{count}]",
    "load.cell_starting": "the cell starting `{line}`",
    "load.syntax": "{where}: syntax error at line {line}: {error}",
    "load.not_compiled": "{where}: cannot be compiled: {error}",
    "load.raised": "{where}{line} raised {type}: {error}",
    "load.kit_read": "{where}{line} read the grading kit's own file {path}: graded code may "
                     "not read the kit's files; write the code yourself",
    "load.raised_bare": "{where}{line} raised {type}",
    "load.not_installed": "{where}{line} imports {module}, which is not installed here: run "
                          "pip install \"mha-kit[{extra}]\" (Colab's torch brings it)",
    "load.unreadable": "{path} could not be read: {type}: {error}",

    # The worker process (runner.worker)
    "worker.cap": "not run: grading this submission reached its overall limit of {limit:g} s",
    "worker.load_timeout": "loading your file did not finish within {limit:g} s (an infinite "
                           "loop at top level?)",
    "worker.slow_cell": "{cell} of your notebook was still running when loading reached its "
                        "{limit:g} s limit: it was stopped and left out, so what it defines is "
                        "missing (the cells after it ran)",
    "worker.load_crash": "your file ended the grading process while loading ({status})",
    "worker.no_answer": "it stopped answering",
    "worker.killed": "killed by {signal}",
    "worker.killed_oom": "killed by {signal} (out of memory?)",
    "worker.killed_abort": "killed by {signal} (a crash in native code, or out of memory)",
    "worker.killed_crash": "killed by {signal} (a crash in native code)",
    "worker.exit_code": "exit code {code}: sys.exit or os._exit in student code?",
    "worker.check_cap": "`{what}` was stopped: the check {check} reached its limit of {limit:g} "
                        "s (is your code very slow?)",
    "worker.total_cap": "`{what}` was stopped: grading this submission reached its overall "
                        "limit of {limit:g} s",
    "worker.timeout": "`{what}` timed out after {limit:g} s (an infinite loop?)",
    "worker.disk_cap": "`{what}` was stopped: the files your code wrote take more than "
                       "{gib:g} GiB of disk, the grader's limit for one submission (files it "
                       "deleted but still holds open count too)",
    "worker.crash": "`{what}` ended the grading process ({status})",
    "worker.crash_triton": "{crash}. In Triton's interpreter this is most often a tl.load or "
                           "tl.store past the end of a tensor: give each a mask (rows < T, "
                           "say) and the loads an `other=` for the lanes it leaves out",
    "worker.unreadable_reply": "`{what}` sent back something other than plain tensors and values "
                               "({error}), which the grader does not read",
    "worker.malformed_reply": "`{what}`: the worker sent a malformed reply",
    "worker.unsendable": "`{what}` returned something that cannot be sent back ({type}): return "
                         "plain tensors",
    "worker.grader_error": "{type}: {error}",  # the grader's own code failed in the worker
    "worker.cannot_start": "the grading worker could not start{user}: {error}",
    "worker.as_user": " as user {user!r} ({variable} chooses another)",
    "worker.printed": "{text}",
    "worker.printed_more": "{text} ... ({count:,} characters in all)",
    "runner.params_in_forward": "`{name}` makes new parameters on every call ({count} of "
                                "them, the first in a {layer}{where}): a layer built inside "
                                "forward has fresh random weights each time, the grader cannot "
                                "load its own into it, and training never sees it. Build every "
                                "layer once in __init__ (self.proj = nn.Linear(...)) and only "
                                "call it in forward",
    "worker.timing": "{name} (timing)",
    "sandbox.off": "warning: student code runs without the sandbox ({reason}): it can read and "
                   "write wherever the account it runs as may (the kit's installation, the "
                   "course folder, other submissions, your home folder) and use the network. "
                   "Linux's Landlock (kernel 5.13 or later) or bubblewrap (apt-get install "
                   "bubblewrap) protects them ({variable} unset).",
    "sandbox.on": "student code runs in the sandbox ({layers}): it can write only its scratch "
                  "folder, and has no network",
    "sandbox.disabled": "{variable}=off",
    "sandbox.missing": "{bwrap} not found",
    "sandbox.broken": "{bwrap} cannot build its sandbox here: {error}",
    "sandbox.no_landlock": "this kernel offers no Landlock ({error})",
    "sandbox.not_linux": "Landlock is Linux's, and this is {platform}",
    "sandbox.no_network": "Landlock ABI {abi} cannot close the network without seccomp, which "
                          "the kit does not set up on {machine}",
    "runner.warned": "PyTorch warned at your line {line}{cell}: {warning}",
    "runner.warned_code": "PyTorch warned at your line {line}{cell} (`{code}`): {warning}",
    "warning.x_t": "x.T on a tensor of more than 2 dims reverses all its dims ((B, H, T, D) "
                   "becomes (D, T, H, B)): to swap the last two, use x.transpose(-2, -1) or x.mT",
    "warning.softmax_dim": "softmax without dim= guesses the dim: say which, softmax(scores, "
                           "dim=-1)",
}
