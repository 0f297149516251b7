"""Gradients and devices: a layer that cannot be trained, that crashes on the first GPU, or that
changes its caller's tensors loses the checks it takes part in, with a message that names the
cause (docs/grading.md, "Gradients and devices").

The corpus (tests/corpus/training_mutants.py) is template.py with one edit each that keeps the
forward values right: the failing messages must be gradient, device or in-place messages,
never about forward values. The other direction, correct code in many styles getting full marks, is
tests/test_corpus.py's, over tests/corpus/alternatives (finfo_min_fill.py and
large_negative_fill.py hold the habits a GPU accepts and a meta tensor does not).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import CORPUS, DETERMINISTIC, TEMPLATE, messages_with
from test_messages import english_prose

from mha_kit.checks.core import CheckResult
from mha_kit.grading.registry import run_check, run_checks
from mha_kit.messages import ids_in, msg, render
from mha_kit.runner.backward import InPlace, _match, out_of_place
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import Limits
from mha_kit.runner.protocol import StudentCodeError
from mha_kit.runner.worker import WorkerSubmission

sys.path.insert(0, str(CORPUS))
from training_mutants import DEVICES, IN_PLACE, TRAINING, Broken  # noqa: E402

ALL = TRAINING + DEVICES + IN_PLACE
PREFIX = {"gradient": "grad.", "device": "device.", "in_place": "check.in_place"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("broken")


@cache
def graded(broken: Broken, folder: Path) -> list[CheckResult]:
    path = folder / f"broken_{ALL.index(broken)}.py"
    path.write_text(broken.source())
    return run_checks(InProcessSubmission.from_path(path), only=DETERMINISTIC)


def test_the_corpus_is_big_enough():
    assert len(TRAINING) >= 8 and len(DEVICES) >= 3 and IN_PLACE
    assert len({b.label for b in ALL}) == len(ALL)
    for broken in ALL:
        assert broken.source() != TEMPLATE.read_text()
        assert broken.fails and broken.fails <= set(DETERMINISTIC), broken.label
        assert broken.kind in PREFIX


@pytest.mark.parametrize("broken", ALL, ids=[b.label for b in ALL])
def test_each_fails_exactly_its_checks_with_a_message_naming_the_cause(broken: Broken,
                                                                       folder: Path):
    results = graded(broken, folder)
    failed = {r.id: r.message for r in results if not r.passed}
    shown = "\n".join(f"{k}: {m}" for k, m in failed.items())
    assert set(failed) == broken.fails, f"{broken.label}\n{shown}"
    for check_id, message in failed.items():
        found = ids_in(message)
        assert any(i.startswith(PREFIX[broken.kind]) for i in found), (check_id, shown)
        # the forward values were right: no message about them, no known mistake named
        assert not any(i.startswith(("what.", "mistake.", "values.")) for i in found), shown
        assert english_prose(render(message, "zh")) == [], render(message, "zh")


def test_the_in_place_op_is_named_with_what_to_write_instead(folder: Path):
    broken = next(b for b in TRAINING if "masked_fill_" in b.label)
    attend = next(r for r in graded(broken, folder) if r.id == "attend")
    (told,) = messages_with(attend.message, "grad.inplace")
    assert told.params["code"] == "weights.masked_fill_(mask, 0.0)"
    assert told.params["fix"] == "weights = weights.masked_fill(mask, 0.0)"  # write it instead


def test_the_device_message_says_where_the_cpu_tensor_is_made(folder: Path):
    broken = next(b for b in DEVICES if "causal mask on the CPU" in b.label)
    masks = next(r for r in graded(broken, folder) if r.id == "fused_mha_masks")
    (told,) = messages_with(masks.message, "device.cpu_tensor")
    assert told.params["name"] == "MultiHeadAttention.forward"
    assert told.params["where"].id == "device.where_code"
    assert told.params["where"].params["code"] == "causal = causal_mask(tq)"


def test_causal_mask_on_the_wrong_device_is_told_to_use_its_device_argument(folder: Path):
    broken = next(b for b in DEVICES if "ignores its device argument" in b.label)
    mask = next(r for r in graded(broken, folder) if r.id == "causal_mask")
    # use the device it is given (device=device), not x.device (device.output, cpu_tensor)
    assert mask.message.params["text"] == msg("device.output_argument", name="causal_mask",
                                              device="cpu"), mask.message


@pytest.mark.parametrize("out, fix", [
    ("weights.masked_fill_(mask, 0.0)", "weights = weights.masked_fill(mask, 0.0)"),
    ("e /= e.sum(-1, keepdim=True)", "e = e / e.sum(-1, keepdim=True)"),
    ("scores *= scale", "scores = scores * scale"),
    ("w = scores.exp_()", "w = scores.exp()"),
    ("w[mask] = 0", "w = w.clone()"),  # to write before it: no out-of-place twin
    ("w[..., 0] *= 2", "w = w.clone()"),
])
def test_an_in_place_line_is_written_out_of_place(out: str, fix: str):
    assert out_of_place(out) == fix


def test_the_in_place_op_is_the_one_on_the_tensor_the_error_names():
    harmless = InPlace("e.add_(1)", 3, (1, 1, 1, 2), "ExpBackward0")
    culprit = InPlace("w.masked_fill_(m, 0)", 5, (1, 1, 1, 2), "SoftmaxBackward0")
    error = ("one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [torch.DoubleTensor [1, 1, 1, 2]], which is output 0 of "
             "Softmax, is at version 1; expected version 0 instead.")
    assert _match(error, [harmless, culprit]) is culprit


# --------------------------------------------------------------------------- the meta device

def _meta_call(code: str, *args: Any) -> Any:
    """`f(*args)` defined by `code`, called through the runner with meta inputs."""
    namespace: dict[str, Any] = {"torch": torch}
    exec(code, namespace)
    return InProcessSubmission(namespace).call("f", *args)


META = torch.empty(2, 3, 3, device="meta")


@pytest.mark.parametrize("code", [
    "def f(x):\n    return x * (1 / torch.sqrt(torch.tensor(3)))",  # a 0-dim CPU scalar
    "def f(x):\n    return torch.softmax(x + torch.zeros(3, 3, device=x.device), -1)",
])
def test_code_a_gpu_runs_passes_on_meta(code: str):
    assert _meta_call(code, META).value.device.type == "meta"


@pytest.mark.parametrize("code", [
    "def f(x):\n    return x * x.sum().item()",  # no data on meta, fine on a GPU
    "def f(x):\n    return x * 2 if bool((x > 0).any()) else x",
    "def f(x):\n    return x.cpu()",
])
def test_a_meta_limitation_is_not_a_device_mix(code: str):
    with pytest.raises(StudentCodeError) as raised:
        _meta_call(code, META)
    assert raised.value.kind in ("raised", "not_implemented")  # which expect_on_meta lets pass


@pytest.mark.parametrize("code", [
    "def f(x):\n    return x / torch.sqrt(torch.Tensor([3]))",  # shape (1,), on the CPU
    "def f(x):\n    return x.masked_fill(torch.ones(3, 3).triu(1).bool(), 0)",
    "def f(x):\n    return x @ torch.eye(3)",  # meta's matmul does not check: the watch does
])
def test_a_cpu_tensor_beside_a_meta_one_is_a_device_mix(code: str):
    with pytest.raises(StudentCodeError) as raised:
        _meta_call(code, META)
    assert raised.value.kind == "device"
    assert raised.value.message.id == "device.cpu_tensor", raised.value.message


# --------------------------------------------------------------------------- the worker

def test_gradient_and_device_messages_are_the_same_through_the_worker(folder: Path):
    for broken, check_id in ((TRAINING[4], "attend"), (DEVICES[1], "scaled_scores")):
        in_process = next(r for r in graded(broken, folder) if r.id == check_id)
        with WorkerSubmission(folder / f"broken_{ALL.index(broken)}.py") as sub:
            in_worker = run_check(check_id, sub)
        assert not in_worker.passed
        assert render(in_worker.message, "en") == render(in_process.message, "en")


HANGING_BACKWARD = '''
import time


class _Slow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(30)
        return grad


def merge_heads(x):
    b, h, t, d = x.shape
    return _Slow.apply(x).transpose(1, 2).reshape(b, t, h * d)
'''


def test_a_hanging_backward_loses_only_its_check(tmp_path: Path):
    path = tmp_path / "hang.py"
    path.write_text(TEMPLATE.read_text() + HANGING_BACKWARD)
    with WorkerSubmission(path, limits=Limits(call_s=1, check_s=20)) as sub:
        merge = run_check("merge_heads", sub)
        split = run_check("split_heads", sub)
    assert merge.score == 0 and "worker.timeout" in ids_in(merge.message), merge.message
    assert split.passed, split.message


HUNGRY_BACKWARD = '''


class _Hungry(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad + torch.zeros(2**40, dtype=torch.uint8).sum()  # a terabyte


def merge_heads(x):
    b, h, t, d = x.shape
    return _Hungry.apply(x).transpose(1, 2).reshape(b, t, h * d)
'''


def test_a_backward_out_of_memory_loses_only_its_check(tmp_path: Path):
    path = tmp_path / "hungry.py"
    path.write_text(TEMPLATE.read_text() + HUNGRY_BACKWARD)
    with WorkerSubmission(path) as sub:
        merge = run_check("merge_heads", sub)
        split = run_check("split_heads", sub)
    assert merge.score == 0 and "runner.out_of_memory" in ids_in(merge.message), merge.message
    assert split.passed, split.message
