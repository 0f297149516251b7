"""Attacks on the grade (issue 40's table): each is a correct reference file with one trick
added at its end, which redefines some answers; `earns` is what the attack must score on the
checks it touches: what an honest file with the same code of its own earns there.

tests/test_attacks.py grades each through the worker, as `mha-kit check` does. The thread,
fork and leftover attacks are in tests/hostile (the batch), the slowed decoding baseline in
tests/corpus/llm/decode_styles.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).parent
BASES = {"mha": CORPUS / "template.py", "llm_attention": CORPUS / "llm" / "reference.py",
         "shapes": None}  # the warm-up's attack is all its file holds
_ORACLE = "autograder.assignments.llm_attention.oracle"
_FLASH_VARIANTS = "autograder.assignments.llm_attention.flash_variants"


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
           "from autograder.oracle import (attend, causal_mask, merge_heads, output_projection,"
           "\n    scaled_scores, split_heads)\n",
           dict.fromkeys(("split_heads", "scaled_scores", "causal_mask", "attend",
                          "merge_heads", "output_projection"), 0)),
    Attack("the kit's stand-in AttentionHead, outside the check it stands in for", "mha",
           "from autograder.assignments.mha.standins import AttentionHead\n",
           {"attention_head": 0}),
    Attack("RoPE and repeat_kv from the kit's oracle", "llm_attention",
           f"from {_ORACLE} import repeat_kv\nfrom {_ORACLE} import rope as apply_rope\n",
           {"llm_rope": 0, "llm_repeat_kv": 0}),
    Attack("FlashAttention from the kit's variants, no mistake switched on", "llm_attention",
           f"from {_FLASH_VARIANTS} import flash_variant\n\n\n"
           "def flash_attention(q, k, v, *, is_causal=False, block_size=64):\n"
           "    return flash_variant(q, k, v, is_causal, block_size)\n",
           {"llm_flash_forward": 0}),
    Attack("the view quiz answered by the kit's own truth", "shapes",
           "from autograder.assignments.shapes.checks import view_quiz_truth as view_quiz\n",
           {"shapes_view_quiz": 0}),
    Attack("the full matrix on real tensors, nothing on the meta device", "llm_attention",
           "_flash = flash_attention\n\n\n"
           "def flash_attention(q, k, v, *, is_causal=False, block_size=64):\n"
           "    if q.device.type == 'meta':\n"
           "        return _flash(q, k, v, is_causal=is_causal, block_size=block_size)\n"
           "    return _flash(q, k, v, is_causal=is_causal, block_size=k.shape[2])\n",
           {"llm_flash_forward": 15, "llm_flash_memory": 0},
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
)
