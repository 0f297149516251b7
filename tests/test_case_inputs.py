"""Inputs reach the student's code as their case says: a case labelled non-contiguous passes
non-contiguous tensors, and self-attention one tensor three times, in process and through the
worker's pipe, so code that treats them differently is caught, or runs as it would. Under a
course secret they are the instructor's alone: a table of answers recorded with the public kit
misses them (red team n4), and correct code earns the same full marks under any secret."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

import pytest
import torch
from conftest import TEMPLATE

from mha_kit import settings
from mha_kit.checks.core import HIDDEN_SALT, Context
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import ASSIGNMENTS, POINTS, run_checks
from mha_kit.messages import ids_in
from mha_kit.runner import sandbox
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.protocol import copy_as_given

NON_CONTIGUOUS = {"case.non_contiguous_input", "case.non_contiguous_inputs",
                  "case.non_contiguous_x"}

# The template with one function that scales any non-contiguous input by 1.5.
ODD_ON_STRIDES = {
    "split_heads": ("    b, t, e = x.shape\n",
                    "    b, t, e = x.shape\n    x = x if x.is_contiguous() else x * 1.5\n"),
    "output_projection": ("def output_projection(x, weight, bias=None):\n",
                          "def output_projection(x, weight, bias=None):\n"
                          "    x = x if x.is_contiguous() else x * 1.5\n"),
}


def odd_file(tmp_path: Path, check: str) -> Path:
    old, new = ODD_ON_STRIDES[check]
    text = TEMPLATE.read_text()
    assert text.count(old) == 1, check
    path = tmp_path / f"{check}.py"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("check", sorted(ODD_ON_STRIDES))
def test_code_that_treats_non_contiguous_input_differently_is_caught(tmp_path, check):
    path = odd_file(tmp_path, check)
    (in_process,) = run_checks(InProcessSubmission.from_path(path), only=[check])
    through_worker = grade_submission(path, only=[check])[0][0]
    for result in (in_process, through_worker):
        assert not result.passed
        assert NON_CONTIGUOUS & ids_in(result.message)  # the case that shows it


def test_a_copy_keeps_the_strides_it_was_given():
    gapped = torch.arange(24.0).view(2, 12)[:, ::2]  # a view with gaps: clone() packs it
    assert gapped.clone().is_contiguous()
    copy = copy_as_given(gapped)
    assert copy.stride() == gapped.stride() and torch.equal(copy, gapped)
    assert copy.untyped_storage().data_ptr() != gapped.untyped_storage().data_ptr()
    expanded = torch.ones(3).expand(4, 3)  # overlapping: copied contiguous, as clone() does
    assert torch.equal(copy_as_given(expanded), expanded)


# The template's fused module finished for self-attention only, told apart by identity, as
# nn.MultiheadAttention's own fast path tells it (`query is key`).
SELF_ONLY = ("        key = query if key is None else key\n",
             "        if key is not None and (key is not query or value is not query):\n"
             "            raise NotImplementedError('cross-attention: later')\n"
             "        key = query if key is None else key\n")


def test_self_attention_passes_one_tensor_three_times(tmp_path):
    """`mha(x, x, x)`, in process and through the worker's pipe: a module that asks
    `key is query` runs its self-attention path, and only the cross-attention cases raise."""
    text = TEMPLATE.read_text()
    at = text.rindex(SELF_ONLY[0])  # the fused module: the file's last class
    path = tmp_path / "self_only.py"
    path.write_text(text[:at] + SELF_ONLY[1] + text[at + len(SELF_ONLY[0]):])
    checks = ["fused_mha", "fused_mha_masks", "fused_mha_contract"]
    for results in (run_checks(InProcessSubmission.from_path(path), only=checks),
                    grade_submission(path, only=checks)[0]):
        by_id = {r.id: r for r in results}
        assert by_id["fused_mha_masks"].passed and by_id["fused_mha_contract"].passed, results
        assert "cause.not_implemented" in ids_in(by_id["fused_mha"].message)  # cross only


# --------------------------------------------------------------------------- a course secret

# The steps of one output (attend gives two)
STEPS = ("split_heads", "scaled_scores", "merge_heads", "output_projection")
# The mha checks whose inputs are drawn for them (the speed check's are fresh every run)
UNTIMED = [c for c in ASSIGNMENTS["mha"] if not c.timed]


def _call_key(name: str, args: tuple, kwargs: dict) -> str:
    """A call by its inputs' values: what a table of recorded answers is looked up by."""
    def part(value: object) -> str:
        if isinstance(value, torch.Tensor):
            data = value.detach().contiguous()
            digest = ("meta" if data.is_meta else
                      hashlib.sha256(data.cpu().numpy().tobytes()).hexdigest())
            return f"T{tuple(data.shape)}{data.dtype}{digest}"
        return repr(value)
    return "|".join([name, *map(part, args), *(f"{k}={part(v)}" for k, v in kwargs.items())])


class _Recorded(torch.autograd.Function):
    """The student's function run on the call's inputs; its output, and the gradients of each
    backward it meets (by the gradient it is given), kept in `entry`."""

    @staticmethod
    def forward(ctx, entry, fn, args, *leaves):
        with torch.enable_grad():
            ctx.leaves = [leaf.detach().requires_grad_() for leaf in leaves]
            given = iter(ctx.leaves)
            ctx.out = fn(*[next(given) if _leaf(a) else a for a in args])
        ctx.entry = entry
        entry["out"] = ctx.out.detach()
        return ctx.out.detach().clone()

    @staticmethod
    def backward(ctx, grad):
        grads = torch.autograd.grad(ctx.out, ctx.leaves, grad, allow_unused=True)
        ctx.entry[_call_key("grad", (grad,), {})] = grads
        return (None, None, None, *grads)


class _Replayed(torch.autograd.Function):
    """An answer looked up: the output recorded, and the gradients recorded for this one."""

    @staticmethod
    def forward(ctx, entry, *leaves):
        ctx.entry = entry
        return entry["out"].clone()

    @staticmethod
    def backward(ctx, grad):
        return (None, *ctx.entry[_call_key("grad", (grad,), {})])


def _leaf(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _replayed_steps(namespace: dict) -> dict:
    """Red team n4 in small: each step's answers (outputs and gradients) recorded once,
    through the checks on the public kit's inputs, visible and hidden, then functions that
    only look them up."""
    table: dict[str, dict] = {}

    def recording(name: str):
        def record(*args, **kwargs):
            args = inspect.signature(namespace[name]).bind(*args, **kwargs).args
            entry = table.setdefault(_call_key(name, args, {}), {})
            return _Recorded.apply(entry, namespace[name], args, *filter(_leaf, args))
        return record

    for salt in ("", HIDDEN_SALT):  # the hidden inputs' salt is the public kit's too
        run_checks(InProcessSubmission({**namespace, **{n: recording(n) for n in STEPS}}),
                   only=list(STEPS), salt=salt)

    def replaying(name: str):
        def replay(*args, **kwargs):
            args = inspect.signature(namespace[name]).bind(*args, **kwargs).args
            if (key := _call_key(name, args, {})) not in table:
                raise NotImplementedError("not in the table")
            return _Replayed.apply(table[key], *filter(_leaf, args))
        return replay

    return {n: replaying(n) for n in STEPS}


def test_a_table_of_answers_recorded_offline_misses_under_a_course_secret(monkeypatch):
    namespace: dict = {}
    exec(compile(TEMPLATE.read_text(), str(TEMPLATE), "exec"), namespace)
    replay = _replayed_steps(namespace)
    for salt in ("", HIDDEN_SALT):  # the public inputs are fixed: the table answers them
        results = run_checks(InProcessSubmission(dict(replay)), only=list(STEPS), salt=salt)
        assert {r.id: r.score for r in results} == {s: POINTS[s] for s in STEPS}, results
    monkeypatch.setenv(settings.variable("secret"), "the instructor's own")
    for salt in ("", HIDDEN_SALT):
        results = run_checks(InProcessSubmission(dict(replay)), only=list(STEPS), salt=salt)
        assert {r.id: r.score for r in results} == dict.fromkeys(STEPS, 0), results


def test_correct_code_earns_every_point_under_any_secret_and_the_same_twice(monkeypatch):
    def scores() -> dict[str, float]:
        return {r.id: r.score for r in run_checks(InProcessSubmission.from_path(TEMPLATE),
                                                  only=[c.id for c in UNTIMED])}

    full = {c.id: POINTS[c.id] for c in UNTIMED}
    for secret in ("first secret", "second secret"):
        monkeypatch.setenv(settings.variable("secret"), secret)
        assert scores() == full
    assert scores() == full  # the second secret's inputs again


def test_the_secret_changes_the_inputs_and_never_reaches_student_code(monkeypatch):
    public = Context().generator("split_heads", 1).initial_seed()
    monkeypatch.setenv(settings.variable("secret"), "A")
    first = Context().generator("split_heads", 1).initial_seed()
    assert first != public and first == Context().generator("split_heads", 1).initial_seed()
    monkeypatch.setenv(settings.variable("secret"), "B")
    assert Context().generator("split_heads", 1).initial_seed() not in (public, first)
    assert settings.variable("secret") not in sandbox.student_environment(os.environ)
    assert settings.variable("secret") not in sandbox.with_settings(os.environ)
