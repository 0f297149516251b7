"""The numbers the docs and notebooks quote are the code's: the speed checks' thresholds and
sizes, the memory check's size, and the scores of FlashAttention's float32 case. Each is read
from the code; a change there fails here until every quote follows it."""

from __future__ import annotations

import math
import re
from functools import cache

import nbformat
import pytest
import torch
from conftest import ROOT, SPEED

from mha_kit.assignments.llm_attention.decode_config import GRADED
from mha_kit.assignments.llm_attention.decode_speed import LESS_WORK_NEEDED
from mha_kit.assignments.llm_attention.flash import FLASH_CASES, MEMORY_SHAPE
from mha_kit.assignments.mha.speed import MAX_RUNS, NEAR, SPEEDUP_NEEDED
from mha_kit.grading.registry import POINTS
from mha_kit.messages import TEMPLATES
from mha_kit.speed.verdict import BUDGET_S

LLM = "solutions/llm_attention/llm_attention.ipynb"
LLM_ZH = "solutions/llm_attention_zh/llm_attention_zh.ipynb"
CONCEPTS, CONCEPTS_ZH = "docs/llm-concepts.md", "docs/llm-concepts_zh.md"
SPEED_DOC, GUIDE = "docs/speed.md", "docs/student-guide.md"
TOKENS_ZH = r"个\s*(?:token|词元)\s*"
# Powers of ten in words, English and Chinese: "a hundredfold", "the hundreds", "一百倍", "几百".
POWERS = {1: ("ten", "十"), 2: ("hundred", "百"), 3: ("thousand", "千")}

# Where each number is quoted: a pattern whose named groups are numbers of `code_values`, and
# the docs and notebooks that must say it. A space in a pattern stands for any white space (a
# line may break there).
QUOTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The decoding speed check: its threshold and its sizes.
    (r"at least (?P<less_work>\S+) times less work", (LLM,)),
    (r"至少少 (?P<less_work>\S+) 倍时得分", (LLM_ZH,)),
    (r"`LESS_WORK_NEEDED` times less work \((?P<less_work>\S+), in `decode_speed\.py`\)",
     (CONCEPTS,)),
    (r"`LESS_WORK_NEEDED` 倍\s*（(?P<less_work>[^，]+)，见 `decode_speed\.py`）", (CONCEPTS_ZH,)),
    (r"`LESS_WORK_NEEDED` = (?P<less_work>\S+) times", (SPEED_DOC,)),
    (r"needed: at least (?P<less_work>\S+)× less", (SPEED_DOC,)),
    (r"decodes (?P<decode_N>\d+) tokens one at a time through your `KVCache` after a prefill of "
     r"(?P<decode_P>\d+)", (LLM, CONCEPTS)),
    (rf"在 (?P<decode_P>\d+) {TOKENS_ZH}的预填充之后，\s*经你的 `KVCache` 一次一个地解码 "
     rf"(?P<decode_N>\d+) {TOKENS_ZH}", (LLM_ZH, CONCEPTS_ZH)),
    (r"prefill of P = (?P<decode_P>\d+) tokens through a fresh `KVCache`, then decodes "
     r"N = (?P<decode_N>\d+)", (SPEED_DOC,)),
    (r"\(E = (?P<decode_E>\d+), (?P<decode_H>\d+) query heads, (?P<decode_Hkv>\d+) key/value "
     r"heads", (LLM, SPEED_DOC)),
    (r"（E = (?P<decode_E>\d+)，(?P<decode_H>\d+) 个 query 头，(?P<decode_Hkv>\d+) 个 key/value 头",
     (LLM_ZH,)),
    # The speed check of mha: its threshold, on the CPU and on a GPU, and its constants.
    (r"\| `speed\.SPEEDUP_NEEDED` \| (?P<speedup>[\d.]+) \|", (SPEED_DOC,)),
    (r"`SPEEDUP_NEEDED = (?P<speedup>[\d.]+)`", (SPEED_DOC,)),
    (r"needed: at least (?P<speedup>[\d.]+)×(?! less)", (SPEED_DOC, GUIDE, "README.md")),
    (r"the CPU's threshold of (?P<speedup>[\d.]+)× holds there too", (SPEED_DOC,)),
    (r"The threshold stays (?P<speedup>[\d.]+)× on both devices", (SPEED_DOC,)),
    (r"all (?P<speed_points>\d+) points from (?P<speedup>[\d.]+)×", (GUIDE,)),
    (r"stays (?P<speedup>[\d.]+)× faster", (GUIDE,)),
    (r"\| `speed\.NEAR` \| (?P<near>[\d.]+) \|", (SPEED_DOC,)),
    (r"\| `speed\.MAX_RUNS` \| (?P<max_runs>\d+) \|", (SPEED_DOC,)),
    (r"\| `verdict\.BUDGET_S` \| (?P<budget>[\d.]+) s \|", (SPEED_DOC,)),
    # FlashAttention: the memory check's size, the float32 case's scale and scores.
    (r"B = (?P<memory_B>\d+)[,、]\s*H = (?P<memory_H>\d+)[,、]\s*Tq = Tk = (?P<memory_T>\d+)"
     r"[,、]\s*D = (?P<memory_D>\d+)[,、]\s*block_size = (?P<memory_block>\d+)",
     (LLM, LLM_ZH, CONCEPTS, CONCEPTS_ZH)),
    (r"q scaled up a (?P<scale>\w+?)fold, where the scores reach the (?P<scores>\w+?)s\b",
     (LLM, CONCEPTS)),
    (r"把 q 放大一(?P<scale_zh>[十百千])倍[，使]\s*分数达到[几数](?P<scores_zh>[十百千])",
     (LLM_ZH, CONCEPTS_ZH)),
)


@cache
def code_values() -> dict[str, str]:
    """Each number as the code has it, written as the docs write it."""
    flash32 = next(c for c in FLASH_CASES if c.dtype == torch.float32)
    q, k, _ = flash32.draw(torch.Generator().manual_seed(0), "cpu")
    largest = (q.double() @ k.double().transpose(-2, -1)).abs().max().item() / flash32.D ** 0.5
    scale = POWERS[round(math.log10(flash32.logit_scale))]
    assert 10 ** round(math.log10(flash32.logit_scale)) == flash32.logit_scale  # said in words
    scores = POWERS[math.floor(math.log10(largest))]
    memory = {f"memory_{name}": str(size) for name, size in MEMORY_SHAPE.items()}
    decode = {f"decode_{name}": str(getattr(GRADED, name)) for name in ("N", "P", "E", "H", "Hkv")}
    return {"less_work": f"{LESS_WORK_NEEDED:g}", **decode, "speedup": f"{SPEEDUP_NEEDED:g}",
            "speed_points": str(POINTS[SPEED]), "near": f"{NEAR:g}", "max_runs": str(MAX_RUNS),
            "budget": f"{BUDGET_S:g}", **memory, "scale": scale[0], "scale_zh": scale[1],
            "scores": scores[0], "scores_zh": scores[1]}


def quoted_text(path: str) -> str:
    """A doc's text, or the markdown of a notebook."""
    if path.endswith(".ipynb"):
        cells = nbformat.read(ROOT / path, as_version=4).cells
        return "\n\n".join(c.source for c in cells if c.cell_type == "markdown")
    return (ROOT / path).read_text(encoding="utf-8")


def quotes(pattern: str, text: str) -> list[dict[str, str]]:
    """The numbers each place that says `pattern` quotes, by group name."""
    return [m.groupdict() for m in re.finditer(pattern.replace(" ", r"\s+"), text)]


def misquoted(pattern: str, text: str) -> list[dict[str, str]]:
    """The places that quote another number than the code's."""
    return [found for found in quotes(pattern, text)
            if found != {name: code_values()[name] for name in found}]


@pytest.mark.parametrize(("pattern", "paths"), QUOTES, ids=[
    f"{i}-{'-'.join(re.compile(pattern).groupindex)}" for i, (pattern, _) in enumerate(QUOTES)])
def test_the_docs_quote_the_codes_numbers(pattern: str, paths: tuple[str, ...]):
    for path in paths:
        text = quoted_text(path)
        assert quotes(pattern, text), f"{path} no longer says {pattern!r}: update QUOTES"
        assert misquoted(pattern, text) == [], f"{path}: the code says {code_values()}"


def test_the_float32_flash_case_is_named_by_its_scores():
    scores, scores_zh = code_values()["scores"], code_values()["scores_zh"]
    assert TEMPLATES["en"]["case.llm_large_scores"] == f"scores in the {scores}s"
    assert re.fullmatch(f"分数达到[几数]{scores_zh}", TEMPLATES["zh"]["case.llm_large_scores"])


def test_a_misquoted_number_is_found():
    assert code_values()["less_work"] != "5" and code_values()["speedup"] != "3"
    assert misquoted(QUOTES[0][0], "at least 5 times\nless work") == [{"less_work": "5"}]
    assert misquoted(r"stays (?P<speedup>[\d.]+)× faster", "stays 3× faster") == [
        {"speedup": "3"}]
    assert misquoted(QUOTES[-2][0], "q scaled up a thousandfold, where the scores reach the "
                                    "hundreds") == [{"scale": "thousand", "scores": "hundred"}]
