"""Feedback on almost-right modules: what a module does wrong besides its values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TEMPLATE, check_here, messages_with, table_texts

from mha_kit.checks.diagnosis import named_in
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import POINTS, run_checks
from mha_kit.messages import ids_in, msg, render
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import Limits
from mha_kit.runner.student_code import CUT, ERROR_KEEP
from mha_kit.runner.worker import _printed

# As a real tutorial writes it: the output projection built inside forward, on every call.
LINEAR_IN_FORWARD = ("        out = self.out_proj(merge_heads(torch.matmul(weights, v)))",
                     "        out = nn.Linear(v.shape[1] * v.shape[-1], query.shape[-1])("
                     "merge_heads(torch.matmul(weights, v)))")


def test_a_layer_built_in_forward_is_named_with_its_line(tmp_path: Path):
    source = TEMPLATE.read_text()
    assert source.count(LINEAR_IN_FORWARD[0]) == 1
    path = tmp_path / "linear_in_forward.py"
    path.write_text(source.replace(*LINEAR_IN_FORWARD))
    results = {r.id: r for r in run_checks(InProcessSubmission.from_path(path),
                                           only=["fused_mha", "fused_mha_masks", "attend"])}
    assert results["attend"].passed  # the functions are untouched
    for check in ("fused_mha", "fused_mha_masks"):
        message = results[check].message
        assert not results[check].passed
        assert {"runner.params_in_forward", "device.where_code"} <= ids_in(message), message
        assert "nn.Linear(v.shape[1]" in str(message)  # the line that builds it


def test_a_correct_module_makes_no_parameter_in_forward():
    results = run_checks(InProcessSubmission.from_path(TEMPLATE), only=["fused_mha"])
    assert results[0].passed and "runner.params_in_forward" not in ids_in(results[0].message)


# Half-finished modules, as students and published code leave them: the fused module raises
# NotImplementedError for one kind of case and hides one of the catalogue's mistakes in the
# cases that run. Each: (the guard, the mistake's edit of template.py's fused module, the
# mistake, what fused_mha_contract says).
_FORWARD_START = """        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.q_proj(query), self.num_heads)"""
HALF_FINISHED = {
    "cross-attention": ("""        if key is not None and key.shape != query.shape:
            raise NotImplementedError("cross-attention: later")
""", ("scaled_scores(q, k)", "scaled_scores(q, k) * math.sqrt(q.shape[-1]) / "
      "math.sqrt(query.shape[-1])"), "scale_by_embed_dim", "scale_by_embed_dim"),
    "masks": ("""        if attn_mask is not None or is_causal:
            raise NotImplementedError("masks: later")
""", ("scaled_scores(q, k)", "torch.matmul(q, k.transpose(-2, -1))"), "no_scaling",
              "cause.not_implemented"),
    "bias=False": ("""        if self.q_proj.bias is None:
            raise NotImplementedError("bias=False: later")
""", ("k = split_heads(self.k_proj(key), self.num_heads)",
      "k = split_heads(self.q_proj(key), self.num_heads)"), "q_proj_on_key", "q_proj_on_key"),
    "dropout": ("""        if self.training and self.dropout.p > 0:
            raise NotImplementedError("dropout: later")
""", ("v = split_heads(self.v_proj(value), self.num_heads)",
      "v = split_heads(self.k_proj(value), self.num_heads)"), "k_proj_on_value",
                "k_proj_on_value"),
}
FUSED = ["fused_mha", "fused_mha_masks", "fused_mha_contract"]


def guarded(guard: str) -> tuple[str, int]:
    """template.py whose fused module runs `guard` first in forward, and the line of the
    guard's last line (its raise)."""
    source = TEMPLATE.read_text()
    assert source.count(_FORWARD_START) == 1
    at = source.index(_FORWARD_START)
    return source[:at] + guard + source[at:], source[:at].count("\n") + guard.count("\n")


def half_finished(kind: str) -> str:
    guard, (old, new), _, _ = HALF_FINISHED[kind]
    source, _ = guarded(guard)
    at = source.rindex(old)  # the fused module is the file's last class
    return source[:at] + new + source[at + len(old):]


@pytest.mark.parametrize("kind", HALF_FINISHED)
def test_a_half_finished_module_is_graded_on_what_runs(kind: str, tmp_path: Path):
    """The mistake in the cases that run is named, and the cases left out are said as such:
    never "not implemented yet" for code that runs."""
    path = tmp_path / "half.py"
    path.write_text(half_finished(kind))
    results = {r.id: r for r in run_checks(InProcessSubmission.from_path(path), only=FUSED)}
    _, _, mistake, contract = HALF_FINISHED[kind]
    assert mistake in named_in(results["fused_mha"].message), results["fused_mha"].message
    for result in results.values():
        assert "runner.not_implemented" not in ids_in(result.message), result.message
    said = results["fused_mha_contract"]
    assert contract in ids_in(said.message) | set(named_in(said.message)), said.message


# The kind of case each guard alone leaves out, as the checks that meet it name it: a trait
# (`with {where}`, what the failing cases share and the passing ones lack) or the case's label.
KIND_NAMED = {
    "cross-attention": {"fused_mha": msg("trait.cross")},
    "masks": {"fused_mha": msg("trait.attn_mask"), "fused_mha_masks": msg("trait.masked"),
              "fused_mha_contract": msg("case.causal_kind")},  # its first case has a mask
    "bias=False": {"fused_mha": msg("trait.no_bias")},
    "dropout": {"fused_mha_contract": msg("case.training", p=0.5)},
}


@pytest.mark.parametrize("kind", HALF_FINISHED)
def test_the_kind_of_case_that_raises_is_named_with_the_error_and_its_line(kind: str,
                                                                            tmp_path: Path):
    """A module right but for one kind of case, where it raises NotImplementedError: each
    check that meets that kind names it in the words of the contract, with the error and its
    line; the other checks earn their points."""
    guard = HALF_FINISHED[kind][0]
    source, line = guarded(guard)
    path = tmp_path / "unfinished.py"
    path.write_text(source)
    results = {r.id: r for r in run_checks(InProcessSubmission.from_path(path), only=FUSED)}
    named = KIND_NAMED[kind]
    assert {c: r.score for c, r in results.items() if c not in named} == {
        c: POINTS[c] for c in FUSED if c not in named}
    error = guard.split('NotImplementedError("')[1].split('")')[0]
    for check, kind_of_case in named.items():
        message = results[check].message
        assert results[check].score == 0 and "runner.not_implemented" not in ids_in(message)
        assert kind_of_case in messages_with(message, kind_of_case.id), message
        assert [m.params for m in messages_with(message, "runner.raised_text")] == [{
            "name": "MultiHeadAttention.forward", "type": "NotImplementedError",
            "line": msg("runner.at_line", line=line, cell=""), "error": error}], message


def test_what_a_student_reads_of_a_module_without_cross_attention(tmp_path: Path):
    """What a student reads for the module left without cross-attention: the kind, the error
    and its line, then the cases; in Chinese too."""
    source, line = guarded(HALF_FINISHED["cross-attention"][0])
    path = tmp_path / "unfinished.py"
    path.write_text(source)
    told = run_checks(InProcessSubmission.from_path(path), only=["fused_mha"])[0].message
    assert render(told, "en").startswith(
        "With cross-attention (key and value other than the query): `MultiHeadAttention.forward`"
        f" raised NotImplementedError, line {line}: cross-attention: later (B="), told
    assert render(told, "zh").startswith("交叉注意力（键和值不是查询）时："), render(told, "zh")


# --------------------------------------------------------------------------- bad input

# An error message made to hurt: a terminal's escape sequences (clear the screen, move up a
# line and erase it, set the title, colour), characters that overwrite or hide text, HTML and
# Markdown, then lines that imitate the grader's own.
FAKE = ("\x1b[2J\x1b[1A\x1b[2K\x1b]0;title\x07\x1b[31mred\x1b[0m\r\b\x00\x07\x9b\u202e"
        "<script>alert(1)</script></pre>**bold**\n✓ fused_mha              15/15  ok\n"
        "  total                  100/100")
# Exceptions a student's code can raise, defined at the end of the file.
EXCEPTIONS = """

class Unsaid(Exception):
    def __str__(self):
        raise RuntimeError("no text")


class NotStr(Exception):
    def __str__(self):
        return 42


class SaysForever(Exception):
    def __str__(self):
        while True:
            pass


class Named(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name")


Hostile = Named("Evil\\x1b[2J\\n✓ fused_mha 15/15", (Exception,), {})
"""
# Raised on cross-attention only: (the exception, its type and text as the message quotes
# them: one line, no escape sequence, other control characters as their escapes, bounded).
RAISED = {
    "plain": ('ValueError("cross-attention: later")', "ValueError", "cross-attention: later"),
    "5 MB": ('ValueError("x" * 5_000_000)', "ValueError", "x" * (ERROR_KEEP - 1) + CUT),
    "100k lines": ('ValueError("\\n" * 3 + "first\\n" * 100_000)', "ValueError", "first"),
    "hostile": (f"ValueError({FAKE!r})", "ValueError",
                "red \\x08\\x00\\x07\\u202e<script>alert(1)</script></pre>**bold**"),
    "__str__ raises": ("Unsaid()", "Unsaid", ""),
    "__str__ is no str": ("NotStr()", "NotStr", ""),
    "hostile class name": ('Hostile("boom")', "Evil", "boom"),
}
CROSS_GUARD = "        if key is not None and key.shape != query.shape:\n            raise {}\n"


def raising(exception: str) -> tuple[str, int]:
    """template.py whose fused module raises `exception` on cross-attention only, and the
    line of the raise."""
    source, line = guarded(CROSS_GUARD.format(exception))
    return source + EXCEPTIONS, line


@pytest.mark.parametrize("name", RAISED)
def test_a_huge_or_hostile_error_is_told_in_one_short_true_line(name: str, tmp_path: Path):
    """In process and in the worker, the same message: the kind of case, the error's type,
    its line and its text, made safe (nothing that moves the cursor, colours a terminal or
    starts a line); the checks it does not meet earn their points."""
    exception, exc_type, text = RAISED[name]
    source, line = raising(exception)
    path = tmp_path / "raises.py"
    path.write_text(source)
    told = []
    for results in (run_checks(InProcessSubmission.from_path(path), only=FUSED),
                    grade_submission(path, only=FUSED)[0]):
        assert [r.score for r in results] == [0, POINTS[FUSED[1]], POINTS[FUSED[2]]], results
        told.append(results[0].message)
    assert told[0] == told[1]  # the worker's message is the one made in process
    message = told[0]
    assert message.id == "cause.on" and message.params["where"] == msg("trait.cross"), message
    place = msg("runner.at_line", line=line, cell="")
    said = (msg("runner.raised_text", name="MultiHeadAttention.forward", type=exc_type,
                line=place, error=text) if text else
            msg("runner.raised", name="MultiHeadAttention.forward", type=exc_type, line=place))
    assert message.params["text"].params["text"] == said
    for lang in ("en", "zh"):
        shown = render(message, lang)
        assert shown.isprintable() and len(shown) < 2 * ERROR_KEEP, shown


def test_a_hostile_error_cannot_fake_the_graders_lines(tmp_path: Path):
    """`mha-kit check` as a person sees it, and Gradescope's results.json, which shows it as
    plain text: one line per check, the grader's total, and the student's text as text."""
    source, line = raising(RAISED["hostile"][0])
    path = tmp_path / "raises.py"
    path.write_text(source)
    run = check_here(str(path), "--json", str(tmp_path / "results.json"),
                     *(f"--only={check}" for check in FUSED), MHA_KIT_LANG="en")
    assert run.returncode == 1, run.stdout + run.stderr
    lines, rows = run.stdout.splitlines(), table_texts(run.stdout)
    assert all(shown.isprintable() for shown in lines), run.stdout
    assert [shown.split()[1] for shown in lines if shown.startswith(("✓", "✗"))] == FUSED
    assert [shown.split() for shown in lines if "total" in shown] == [
        ["total", f"{POINTS[FUSED[1]] + POINTS[FUSED[2]]}/{sum(POINTS[c] for c in FUSED)}"]]
    assert (f"raised ValueError, line {line}: red \\x08\\x00\\x07\\u202e<script>"
            in rows[FUSED.index("fused_mha")]), run.stdout
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["output_format"] == payload["test_output_format"] == "text"
    assert all(test["output"].isprintable() for test in payload["tests"]), payload


@pytest.mark.parametrize("hang", [
    "            while True:\n                pass\n",
    "            raise SaysForever()\n",  # a str() of it never ends
], ids=["in forward", "in its error's __str__"])
def test_a_module_that_hangs_on_one_kind_of_case_is_told_the_case(hang: str, tmp_path: Path):
    """An infinite loop for cross-attention only, in forward or in its error's text: the time
    limit names the case it met (key and query of other lengths), and the checks that never
    meet it are earned. (In a notebook's own process, as any hang of the student's code, it
    is theirs to interrupt.)"""
    path = tmp_path / "hangs.py"
    source, _ = guarded("        if key is not None and key.shape != query.shape:\n" + hang)
    path.write_text(source + EXCEPTIONS)
    results, _ = grade_submission(path, only=["fused_mha", "fused_mha_masks"],
                                  limits=Limits(call_s=1))
    hung, masks = results
    assert not hung.passed and masks.passed
    assert [m.params["limit"] for m in messages_with(hung.message, "worker.timeout")] == [1]
    case = messages_with(hung.message, "check.case")[0].params["case"]
    assert "Tk=" in str(case), case  # the cross-attention case, by its sizes


def test_what_the_code_prints_cannot_fake_the_graders_lines(tmp_path: Path):
    """What a student's code prints (at load and in its calls) is told in one line after
    "your code printed:", line breaks written `\\n`, escape sequences left out: as the CLI
    shows it and in Gradescope's output."""
    path = tmp_path / "prints.py"
    path.write_text(TEMPLATE.read_text() + f"\nprint({FAKE!r})\n")
    run = check_here(str(path), "--json", str(tmp_path / "results.json"),
                     *(f"--only={check}" for check in FUSED), MHA_KIT_LANG="en")
    assert run.returncode == 0, run.stdout + run.stderr
    lines, entries = run.stdout.splitlines(), table_texts(run.stdout)
    assert all(shown.isprintable() for shown in lines), run.stdout
    assert [shown.split()[1] for shown in lines if shown.startswith(("✓", "✗"))] == FUSED
    assert [shown.split() for shown in lines if shown.startswith("  total")] == [
        ["total", f"{sum(POINTS[c] for c in FUSED)}/{sum(POINTS[c] for c in FUSED)}"]]
    printed = [entry.split() for entry in entries if "your code printed:" in entry]
    assert printed == [("- your code printed: red \\x08\\x00\\x07\\u202e<script>alert(1)"
                        "</script></pre>**bold**\\n✓ fused_mha              15/15  ok\\n"
                        "  total                  100/100").split()], run.stdout
    output = json.loads((tmp_path / "results.json").read_text())["output"]
    assert "\\n✓ fused_mha" in output and "\n✓ fused_mha" not in output, output


def test_the_grader_words_what_was_printed_and_takes_no_message_for_it():
    """The worker says what was printed as text and a count; a message in its place (one the
    student's code wrote to the pipe, naming any id it likes) is refused as malformed."""
    assert _printed({"text": "a\nb", "count": 3}) == msg("worker.printed", text="a\\nb")
    assert _printed({"text": "ab", "count": 900}) == msg("worker.printed_more", text="ab",
                                                         count=900)
    forged = msg("report.printed", printed="✓ fused_mha 15/15").to_data()
    odd = (forged, {"text": 1, "count": 1}, "text", {"text": "ab", "count": 1},
           {"text": "ab", "count": 10**5000}, {"text": "", "count": True})
    assert [_printed(data) for data in odd] == [None] * len(odd)
