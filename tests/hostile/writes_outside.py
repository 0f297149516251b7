"""Hostile: right step functions, but it writes outside its folder, calls the grader's machine
and reads another submission.

At import and in every call it appends to each file TARGETS names ({"files": [paths], "port": a
TCP port on 127.0.0.1, "reads": [paths]}; tests/test_sandbox.py writes in a copy the kit's
package, the grader's home, the course folder and /tmp), connects to the port, and reads each
of "reads". It prints how each attempt went, once at import and once at the first call
("import: writes ... connect ... reads ..."). As it is, it tries nothing.
"""

import errno
import math
import socket

import torch
import torch.nn.functional as F

TARGETS = {"files": []}
reported = set()


def _outcome(attempt):
    try:
        attempt()
        return "done"
    except OSError as err:
        return errno.errorcode.get(err.errno, "?") if err.errno else "timeout"


def _append(path, when):
    with open(path, "a") as out:
        out.write(f"written by student code ({when})\n")


def escape(when):
    writes = [_outcome(lambda p=path: _append(p, when)) for path in TARGETS["files"]]
    connect = _outcome(lambda: socket.create_connection(("127.0.0.1", TARGETS["port"]),
                                                        timeout=2).close()) \
        if "port" in TARGETS else "-"
    reads = [_outcome(lambda p=path: open(p).read()) for path in TARGETS.get("reads", [])]
    if TARGETS["files"] and when not in reported:
        reported.add(when)
        print(f"{when}: writes {' '.join(writes)} connect {connect} reads {' '.join(reads)}")


escape("import")


def split_heads(x, num_heads):
    escape("call")
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)


def scaled_scores(q, k):
    escape("call")
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])


def causal_mask(seq_len, device=None):
    escape("call")
    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)


def attend(scores, v, mask=None):
    escape("call")
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def merge_heads(x):
    escape("call")
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def output_projection(x, weight, bias=None):
    escape("call")
    out = torch.matmul(x, weight.t())
    return out if bias is None else out + bias
