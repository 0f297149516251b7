"""Attacks on the grade (issue 40's table): each is a correct reference file with one trick
added at its end, which redefines some answers; `earns` is what the attack must score on the
checks it touches: what an honest file with the same code of its own earns there.

tests/test_attacks.py grades each through the worker, as `mha-kit check` does. The thread,
fork and leftover attacks are in tests/hostile (the batch), the slowed decoding baseline in
tests/corpus/llm/decode_styles.py.

The speed check's attacks (red team n1, n3, n9) start from a module that loops over its heads
where the speed check calls it (`_PER_HEAD`): its honest twin earns the fused checks and none
of the speed points (the loop is counted), and so must they.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mha_kit.grading.registry import POINTS

CORPUS = Path(__file__).parent
BASES = {"mha": CORPUS / "template.py", "llm_attention": CORPUS / "llm" / "reference.py",
         "shapes": None}  # the warm-up's attack is all its file holds
_ORACLE = "mha_kit.assignments.llm_attention.oracle"
_FLASH_VARIANTS = "mha_kit.assignments.llm_attention.flash_variants"


# The template's module, looping over its heads in the speed check's call (causal
# self-attention, no weights) and fused in every other: its honest twin.
_PER_HEAD = """
_Fused = MultiHeadAttention


class MultiHeadAttention(_Fused):
    def per_head(self, x):
        q, k, v = (split_heads(p(x), self.num_heads) for p in (self.q_proj, self.k_proj,
                                                                self.v_proj))
        mask = causal_mask(x.shape[1], device=x.device)
        heads = [attend(scaled_scores(q[:, h], k[:, h]), v[:, h], mask)[0]
                 for h in range(self.num_heads)]
        return self.out_proj(merge_heads(torch.stack(heads, dim=1)))

    def timed_call(self, key, value, attn_mask, is_causal, need_weights):
        return (key is None and value is None and attn_mask is None and is_causal
                and not need_weights and not self.training)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        if not self.timed_call(key, value, attn_mask, is_causal, need_weights):
            return super().forward(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                   need_weights=need_weights)
        return self.trick(query), None

    def trick(self, x):
        return self.per_head(x)
"""
# The head of a trick whose counted calls (`count_ops`) take the fused path, so that the op
# count sees no loop over heads: the rest of `_trick` decides the timed calls.
_COUNTED_FUSED = (
    "def _trick(self, x):\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        if frame.f_code.co_name == 'count_ops':\n"
    "            return _Fused.forward(self, x, is_causal=True, need_weights=False)[0]\n"
    "        frame = frame.f_back\n"
)
_MODES = "torch.overrides._get_current_function_mode_stack()"
# Red team n1's second trick (for the kit's module names): the kit's timer, patched in the
# student's worker, moves 85% of the student's time onto the looped baseline's.
_TIMER_PATCHED = """

def _patch_timer():
    from mha_kit.assignments.mha import baselines, jobs
    from mha_kit.speed.timing import cpu_timer

    moved = [0.0]

    def shifted(fn, xs):
        seconds, outs = cpu_timer(fn, xs)
        if isinstance(fn, baselines.LoopedReference):
            seconds, moved[0] = seconds + moved[0], 0.0
        elif not isinstance(fn, baselines.FusedReference):
            moved[0] += seconds * 0.85
            seconds *= 0.15
        return seconds, outs

    jobs.timer_for = lambda device: shifted


_patch_timer()
"""
_SPEED = {"fused_mha": POINTS["fused_mha"], "fused_mha_masks": POINTS["fused_mha_masks"],
          "speed_fused_vs_looped": 0}


@dataclass(frozen=True)
class Attack:
    label: str
    assignment: str
    trick: str  # appended to the assignment's reference file, if it has one
    earns: dict[str, float]  # check id -> points the attack must get there
    message: str = "runner.kit_code"  # the id of the message of every check it loses

    def source(self) -> str:
        base = BASES[self.assignment]
        return f"{base.read_text()}\n\n{self.trick}" if base else self.trick


ATTACKS: tuple[Attack, ...] = (
    Attack("the six steps answered by the kit's oracle", "mha",
           "from mha_kit.oracle import (attend, causal_mask, merge_heads, output_projection,"
           "\n    scaled_scores, split_heads)\n",
           dict.fromkeys(("split_heads", "scaled_scores", "causal_mask", "attend",
                          "merge_heads", "output_projection"), 0)),
    Attack("the kit's stand-in AttentionHead, outside the check it stands in for", "mha",
           "from mha_kit.assignments.mha.standins import AttentionHead\n",
           {"attention_head": 0}),
    Attack("the kit's oracle read when called, and run under a name of its own (red team 45)",
           "mha",
           "import inspect\n\nimport mha_kit.oracle\n\n\n"
           "def split_heads(x, num_heads):\n"
           "    kit = {'__name__': 'my_helpers'}\n"
           "    exec(compile(inspect.getsource(mha_kit.oracle), 'my_helpers.py', 'exec'), kit)\n"
           "    return kit['split_heads'](x, num_heads)\n",
           {"split_heads": 0}, message="runner.kit_read"),
    Attack("RoPE and repeat_kv from the kit's oracle", "llm_attention",
           f"from {_ORACLE} import repeat_kv\nfrom {_ORACLE} import rope as apply_rope\n",
           {"llm_rope": 0, "llm_repeat_kv": 0}),
    Attack("FlashAttention from the kit's variants, no mistake switched on", "llm_attention",
           f"from {_FLASH_VARIANTS} import flash_variant\n\n\n"
           "def flash_attention(q, k, v, *, is_causal=False, block_size=64):\n"
           "    return flash_variant(q, k, v, is_causal, block_size)\n",
           {"llm_flash_forward": 0}),
    Attack("the view quiz answered by the kit's own truth", "shapes",
           "from mha_kit.assignments.shapes.checks import view_quiz_truth as view_quiz\n",
           {"shapes_view_quiz": 0}),
    Attack("the full matrix on real tensors, nothing on the meta device", "llm_attention",
           "_flash = flash_attention\n\n\n"
           "def flash_attention(q, k, v, *, is_causal=False, block_size=64):\n"
           "    if q.device.type == 'meta':\n"
           "        return _flash(q, k, v, is_causal=is_causal, block_size=block_size)\n"
           "    return _flash(q, k, v, is_causal=is_causal, block_size=k.shape[2])\n",
           {"llm_flash_forward": POINTS["llm_flash_forward"], "llm_flash_memory": 0},
           message="llm.full_matrix_forward"),
    Attack("a KVCache that keeps the tokens, their keys and values recomputed (red team n10)",
           "llm_attention",
           "class KVCache:\n"
           "    def __init__(self):\n"
           "        self.x = None\n\n"
           "    def __len__(self):\n"
           "        return 0 if self.x is None else self.x.shape[1]\n\n\n"
           "_whole = GroupedQueryAttention.forward\n\n\n"
           "def _tokens_kept(self, x, cache=None):\n"
           "    if cache is None:\n"
           "        return _whole(self, x)\n"
           "    cache.x = x if cache.x is None else torch.cat([cache.x, x], dim=1)\n"
           "    return _whole(self, cache.x)[:, -x.shape[1]:]\n\n\n"
           "GroupedQueryAttention.forward = _tokens_kept\n",
           {"llm_kv_cache": 0}, message="llm.cache_not_updated"),
    Attack("zeros while counted, and the kit's timer patched to move its time onto the looped "
           "baseline (red team n1)", "mha",
           _PER_HEAD + "\n\n"
           "def _trick(self, x):\n"
           f"    if any(type(m).__name__ == 'OpCounter' for m in {_MODES}):\n"
           "        return torch.zeros_like(x)\n"
           "    return self.per_head(x)\n\n\n"
           "MultiHeadAttention.trick = _trick\n" + _TIMER_PATCHED,
           _SPEED, message="speed.wrong_counted"),
    Attack("the kit's timer patched to move a slow fused module's time onto the looped "
           "baseline (red team n1's second trick alone)", "mha",
           "_fused = MultiHeadAttention.forward\n\n\n"
           "def _eight_times(self, *args, **kwargs):  # as slow as the kit's looped module\n"
           "    for _ in range(7):\n"
           "        _fused(self, *args, **kwargs)\n"
           "    return _fused(self, *args, **kwargs)\n\n\n"
           "MultiHeadAttention.forward = _eight_times\n" + _TIMER_PATCHED,
           _SPEED, message="speed.too_slow"),
    Attack("F.scaled_dot_product_attention when no watch is on torch's mode stack (red team n3)",
           "mha",
           _PER_HEAD + "\n\n"
           "def _trick(self, x):\n"
           f"    if any(type(m).__name__ in ('_Watch', '_OpWatch') for m in {_MODES}):\n"
           "        return self.per_head(x)\n"
           "    B, T, E = x.shape\n"
           "    q, k, v = (p(x).view(B, T, self.num_heads, -1).transpose(1, 2)\n"
           "               for p in (self.q_proj, self.k_proj, self.v_proj))\n"
           "    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
           "    return self.out_proj(out.transpose(1, 2).reshape(B, T, E))\n\n\n"
           "MultiHeadAttention.trick = _trick\n",
           _SPEED, message="speed.loops"),
    Attack("only the timed calls the timing loop's frame says are checked computed, the "
           "counted call fused (red team n9)", "mha",
           _PER_HEAD + "\n\n"
           "import sys\n\n\n"
           "def _trick(self, x):\n"
           "    frame = sys._getframe(1)\n"
           "    while frame is not None:\n"
           "        if frame.f_code.co_name == 'count_ops':\n"
           "            return _Fused.forward(self, x, is_causal=True, need_weights=False)[0]\n"
           "        loop = frame.f_locals if frame.f_code.co_name in (\n"
           "            'interleaved_times', 'time_round') else {}\n"
           "        if 'xs' in loop:  # a timed round (the warm-up has none)\n"
           "            xs, r = loop['xs'], loop.get('r', loop.get('round', 0))\n"
           "            c = next(i for i, t in enumerate(xs) if t is x)\n"
           "            checked = loop.get('keep', ())\n"
           "            return self.per_head(x) if r * len(xs) + c in checked else (\n"
           "                torch.zeros_like(x))\n"
           "        frame = frame.f_back\n"
           "    return self.per_head(x)\n\n\n"
           "MultiHeadAttention.trick = _trick\n",
           _SPEED, message="speed.wrong_output"),
    Attack("every round's outputs computed in the first from the inputs the worker holds, "
           "looked up after, the counted calls fused (red team 51: 10/10 at 70x while the "
           "worker made every round's inputs at the start)", "mha",
           _PER_HEAD + "\n\n"
           "import gc\n"
           "import sys\n\n"
           "_ahead = {}\n\n\n"
           + _COUNTED_FUSED +
           "    if id(x) not in _ahead:  # every (B, T, E) tensor alive: this round's, and later\n"
           "        for t in gc.get_objects():  # ones if the worker holds them already\n"
           "            if (isinstance(t, torch.Tensor) and t.shape == x.shape\n"
           "                    and id(t) not in _ahead):\n"
           "                _ahead[id(t)] = (t, self.per_head(t))  # t kept: its id stays its\n"
           "    return _ahead[id(x)][1] if id(x) in _ahead else self.per_head(x)\n\n\n"
           "MultiHeadAttention.trick = _trick\n",
           _SPEED, message="speed.too_slow"),
    Attack("the worker's reply to the start of the timing carries times of its own, which "
           "overwrote the grader's, the counted calls fused (review 52: 10/10 at 100x)", "mha",
           _PER_HEAD + "\n\n"
           "import sys\n\n"
           "import mha_kit.assignments.mha.jobs as _jobs\n\n\n"
           + _COUNTED_FUSED +
           "    return self.per_head(x)\n\n\n"
           "_start = _jobs.start_timing\n\n\n"
           "def _start_forged(sub, **kwargs):\n"
           "    summary = _start(sub, **kwargs)\n"
           "    rounds = _jobs.config_for(kwargs['device']).rounds\n"
           "    summary['times'] = {'student': [1e-6] * rounds, 'looped': [1e-4] * rounds,\n"
           "                        'fused': [1e-6] * rounds}\n"
           "    return summary\n\n\n"
           "_jobs.start_timing = _start_forged\n"
           "MultiHeadAttention.trick = _trick\n",
           _SPEED, message="speed.too_slow"),
    Attack("outputs left empty while timed and filled by the loop over heads after the rounds, "
           "before they are shown (review 52: 10/10 while the digests were made after the "
           "rounds)", "mha",
           _PER_HEAD + "\n\n"
           "import sys\n\n"
           "import mha_kit.assignments.mha.jobs as _jobs\n\n"
           "_pending = []\n\n\n"
           + _COUNTED_FUSED +
           "    out = torch.full_like(x, 7.0)  # nothing computed while timed\n"
           "    _pending.append((self, x, out))\n"
           "    return out\n\n\n"
           "_reveal = _jobs.reveal_outputs\n\n\n"
           "def _reveal_filled(sub, **kwargs):\n"
           "    with torch.no_grad():\n"
           "        for module, x, out in _pending:\n"
           "            out.copy_(module.per_head(x))\n"
           "    _pending.clear()\n"
           "    return _reveal(sub, **kwargs)\n\n\n"
           "_jobs.reveal_outputs = _reveal_filled\n"
           "MultiHeadAttention.trick = _trick\n",
           _SPEED, message="speed.output_changed"),
    Attack("the loop over heads in a Python the worker starts through the dynamic loader, "
           "whose CPU time the worker's count missed (red team 52: 10/10 at 8.9x), and which "
           "now cannot read a Python to load", "mha",
           (CORPUS / "attack_tricks" / "helper_program.txt").read_text(),
           _SPEED, message="runner.raised_text"),
    Attack("F.scaled_dot_product_attention in a Python the worker starts through the dynamic "
           "loader, where the watch of forbidden functions does not look (red team 52: 37 of "
           "37, where its twin in the worker earns 21)", "mha",
           (CORPUS / "attack_tricks" / "sdpa_in_helper.txt").read_text(),
           {"fused_mha": POINTS["fused_mha"], "fused_mha_masks": POINTS["fused_mha_masks"],
            "fused_mha_contract": 0, "speed_fused_vs_looped": 0},
           message="runner.raised_text"),
    Attack("the loop over heads in a process that shares the worker's memory and is the "
           "grader's child, started with libc's clone through ctypes, outside every count of "
           "the worker's CPU (red team 53: 10/10 at 11.6-21.7x)", "mha",
           _PER_HEAD + "\n\n" + (CORPUS / "attack_tricks" / "hidden_clone.txt").read_text(),
           _SPEED, message="runner.raised_text"),
    Attack("the loop over heads in a copy of the worker made the grader's child from a thread "
           "of torch's pool, which the worker's tasks filter did not bind (review 53b: 10/10 "
           "at 5.1x)", "mha",
           _PER_HEAD + "\n\n" + (CORPUS / "attack_tricks" / "pool_thread.txt").read_text(),
           _SPEED, message="speed.too_slow"),
)
