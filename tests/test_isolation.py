"""The grader's process never runs student code, forbidden APIs are caught on both paths
(worker and notebook), and a grade is the same run after run."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from conftest import HOSTILE, TEMPLATE, TINY

from mha_kit import settings
from mha_kit.assignments.mha import speed_config
from mha_kit.assignments.mha.baselines import SdpaReference, TorchMHA
from mha_kit.assignments.mha.jobs import PREPARE_JOB, REVEAL_JOB, ROUND_JOB, START_JOB
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import run_check
from mha_kit.messages import ids_in, msg
from mha_kit.runner import policy
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.worker import WorkerSubmission


def test_the_graders_process_never_sees_the_students_code():
    """A submission that patches torch in its own process changes nothing here."""
    originals = (torch.allclose, torch.isclose, torch.equal, torch.testing.assert_close,
                 torch.Tensor.__eq__)
    with WorkerSubmission(HOSTILE / "monkeypatch_torch.py") as sub:
        results = [run_check(check, sub) for check in ("split_heads", "merge_heads")]
    assert [r.score for r in results] == [0, 0]
    assert all("values.wrong" in ids_in(r.message) for r in results)
    after = (torch.allclose, torch.isclose, torch.equal, torch.testing.assert_close,
             torch.Tensor.__eq__)
    assert all(a is b for a, b in zip(after, originals))
    assert not hasattr(torch, "PATCHED_BY_STUDENT")


def test_forbidden_apis_are_caught_in_process_too():
    """The notebook path: student code in this interpreter, the same watch around it; the
    kit's own code, which uses the same APIs, is left alone before and after."""
    sub = InProcessSubmission.from_path(HOSTILE / "forbidden_apis.py")
    head = run_check("attention_head", sub)
    assert head.score == 0
    assert head.message == msg("runner.forbidden", name="AttentionHead.forward",
                               api="F.scaled_dot_product_attention")
    looped = run_check("looped_mha", sub)  # with the kit's AttentionHead: yours fails its check
    assert looped.score == 0 and looped.message.params["text"] == msg(
        "runner.forbidden", name="LoopedMultiHeadAttention.forward", api="nn.MultiheadAttention")
    assert run_check("split_heads", sub).passed  # the rest of the file still counts
    assert not torch.overrides._get_current_function_mode_stack()  # no watch left behind

    params, x = speed_config.speed_params(TINY, 0), speed_config.speed_input(TINY, 0, 0)
    for uses_them in (SdpaReference, TorchMHA):  # their values: test_timing.py
        assert uses_them(params, TINY.H)(x).shape == x.shape
    assert run_check("attention_head", InProcessSubmission.from_path(TEMPLATE)).passed


def test_the_speed_check_times_without_the_watch(monkeypatch):
    """The watch slows every torch call (it tripled a correct module's time), so it is off
    while timing; forwards of the timed shape run under it in the preparation, before: the
    first one, and the two whose calls are counted (their outputs are checked)."""
    sub = InProcessSubmission.from_path(TEMPLATE)
    watching = []
    measure = sub.guard

    def spy(name, action, *, watch=True):
        watching.append(watch)
        return measure(name, action, watch=watch)

    jobs = sub.run_job

    def job(which, what, **kwargs):
        watching.append(which)
        return jobs(which, what, **kwargs)

    monkeypatch.setattr(sub, "guard", spy)
    monkeypatch.setattr(sub, "run_job", job)
    result = run_check("speed_fused_vs_looped", sub)
    assert not {"runner.forbidden", "speed.not_scored", "speed.not_scored_spot"} & ids_in(
        result.message), result.message
    prepare, start = watching.index(PREPARE_JOB), watching.index(START_JOB)
    timed = watching[watching.index(ROUND_JOB):watching.index(REVEAL_JOB)]
    assert True in watching[prepare:start - 2]  # the first forward, before the timing
    assert watching[start - 2:start] == [True, True]  # the counted ones, last
    assert set(timed) == {ROUND_JOB, False}  # every round unwatched


def test_instructors_choose_the_forbidden_list(monkeypatch):
    monkeypatch.setenv(settings.variable("forbidden"), "")
    allowed = InProcessSubmission.from_path(HOSTILE / "forbidden_apis.py")
    assert run_check("fused_mha", allowed).passed
    assert run_check("attention_head", allowed).passed
    monkeypatch.setenv(settings.variable("forbidden"), "torch.nn.functional.softmax")
    strict = InProcessSubmission.from_path(TEMPLATE)  # its attend uses F.softmax
    result = run_check("attend", strict)
    assert result.score == 0
    assert result.message == msg("runner.forbidden", name="attend",
                                 api="torch.nn.functional.softmax")
    monkeypatch.setenv(settings.variable("forbidden"), "torch.no_such_function")
    with pytest.raises(ValueError, match="no_such_function"):
        InProcessSubmission.from_path(TEMPLATE)


def test_the_same_submission_gets_the_same_grade_every_time(tmp_path):
    """Failures included: the same messages, values and smallest failing shapes each run."""
    source = TEMPLATE.read_text()
    wrong_scale = "/ math.sqrt(q.shape[-1])"
    assert source.count(wrong_scale) == 1
    path = tmp_path / "scaled_by_d.py"
    path.write_text(source.replace(wrong_scale, "/ q.shape[-1]"))
    only = ["split_heads", "scaled_scores", "attention_head", "fused_mha"]
    runs = [grade_submission(path, only=only) for _ in range(2)]
    (first, problems), (second, again) = runs
    # The modules call scaled_scores: they are graded with the kit's (CheckSpec.stand_ins).
    assert [r.passed for r in first] == [True, False, True, True]
    assert [(r.id, r.score, r.message) for r in first] == \
        [(r.id, r.score, r.message) for r in second]
    assert problems == again


def test_a_root_grader_drops_to_nobody_where_pip_installed_its_modules_0644():
    """pip writes modules 0644 and folders 0755: every account can read them, and the check
    that decides the drop said otherwise (it asked o+x of the module file itself)."""
    with tempfile.TemporaryDirectory() as folder:  # under /tmp, which every account reaches
        root = Path(folder)
        module = root / "site" / "torch" / "__init__.py"
        module.parent.mkdir(parents=True)
        module.write_text("")
        for path, mode in ((root, 0o755), (root / "site", 0o755), (module.parent, 0o755),
                           (module, 0o644)):
            path.chmod(mode)
        assert policy._open_to_all(module) and policy._open_to_all(module.parent)
        (root / "site").chmod(0o700)  # a folder above it closed (a venv under /root)
        assert not policy._open_to_all(module)
