"""Public code: FlagAttention's FlashAttention-2 in Triton (BAAI; src/flag_attn/flash.py, its
forward and backward kernels behind `FlashAttention`, `attention(...)`), graded through this
adapter.

Published: FlagOpen/FlagAttention @ ee91638dec6da8c00c4113d179f469e0ffcd5852 (2024-06-05):
src/flag_attn/{dropout,total,split_kv,flash}.py, one after another (flash.py imports the
others); Apache License 2.0. `ADAPTATIONS` lists every edit: the package's imports become the
code above them (one alias kept as an assignment), and its CUDA calls made for a GPU's sake
(the device guard, the count of SMs that decides a split over keys) take the CPU's: the device
is the tensor's, and one SM, so keys are never split (the split path allocates on "cuda").
The glue maps the contract onto `attention(q, k, v, causal, return_log_normalizer=True)` and
chooses the blocks through `get_fwd_config` and `get_bwd_config`, which the library says may
be overwritten at runtime (they read the GPU's compute capability).
"""
# ruff: noqa: F821 (the glue calls the published code, which comes before it)

UPSTREAM = (
    ("FlagOpen/FlagAttention", "ee91638dec6da8c00c4113d179f469e0ffcd5852",
     "src/flag_attn/dropout.py", "Apache-2.0"),
    ("FlagOpen/FlagAttention", "ee91638dec6da8c00c4113d179f469e0ffcd5852",
     "src/flag_attn/total.py", "Apache-2.0"),
    ("FlagOpen/FlagAttention", "ee91638dec6da8c00c4113d179f469e0ffcd5852",
     "src/flag_attn/split_kv.py", "Apache-2.0"),
    ("FlagOpen/FlagAttention", "ee91638dec6da8c00c4113d179f469e0ffcd5852",
     "src/flag_attn/flash.py", "Apache-2.0"),
)
ADAPTATIONS = (
    ("from flag_attn.total import _total_attention_kernel\n", "", 1, "defined above"),
    ("from flag_attn.split_kv import _fwd_split_kv_kernel, _fwd_combine_kv_splits, "
     "num_splits_herustic\n", "", 1, "defined above"),
    ("from flag_attn.split_kv import get_fwd_config as get_fwd_config_kv_split\n",
     "get_fwd_config_kv_split = get_fwd_config\n", 1, "split_kv.py's, defined just above"),
    ("from .dropout import philox_cuda_seed_offset\n", "", 1, "defined above"),
    ("device = torch.cuda.device_of(q)", "device = q.device", 4, "no CUDA device here"),
    ("num_sms = torch.cuda.get_device_properties(device).multi_processor_count",
     "num_sms = 1", 2, "no SMs to count: one, so no split over keys"),
    ("with torch.cuda.device(device):", "with torch.device(device):", 4,
     "no CUDA device to guard"),
)

_blocks = {"m": 16, "n": 16}


def _config(B, H, M, N, D, causal):
    return _blocks["m"], _blocks["n"], 1, 4


get_fwd_config = get_bwd_config = get_fwd_config_kv_split = _config


def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):
    _blocks.update(m=block_m, n=block_n)
    out, lse, *_ = attention(q, k, v, causal=is_causal, return_log_normalizer=True)
    return out, lse


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    _blocks.update(m=block_m, n=block_n)
    return attention(q, k, v, causal=is_causal)
