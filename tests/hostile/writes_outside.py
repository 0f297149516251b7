"""Hostile: right step functions, but it writes outside its folder and calls the grader's machine.

At import and in every call it appends to each file MHA_KIT_HOSTILE_TARGETS names (JSON:
{"files": [paths], "port": a TCP port on 127.0.0.1}; tests/test_sandbox.py names the kit's
package, the grader's home, the course folder and /tmp) and connects to the port. It prints
how each attempt went, once at import and once at the first call. Without the variable it
tries nothing.
"""

import errno
import json
import math
import os
import socket

import torch
import torch.nn.functional as F

TARGETS = json.loads(os.environ.get("MHA_KIT_HOSTILE_TARGETS", '{"files": []}'))
reported = set()


def escape(when):
    outcomes = []
    for path in TARGETS["files"]:
        try:
            with open(path, "a") as out:
                out.write(f"written by student code ({when})\n")
            outcomes.append("written")
        except OSError as err:
            outcomes.append(errno.errorcode.get(err.errno, "?"))
    if "port" in TARGETS:
        try:
            socket.create_connection(("127.0.0.1", TARGETS["port"]), timeout=2).close()
            outcomes.append("connected")
        except OSError as err:
            outcomes.append(errno.errorcode.get(err.errno, "?") if err.errno else "timeout")
    if TARGETS["files"] and when not in reported:
        reported.add(when)
        print(f"{when}: {' '.join(outcomes)}")


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
