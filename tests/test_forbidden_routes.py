"""The forbidden-API watch sees every route to the attention kernel, not only the functions of
`torch.nn.functional`: each route of tests/corpus/forbidden_routes.py loses the checks of the
module that takes it, with the name a student knows, in process and through the worker; and
every ATen op of the installed torch that computes attention is forbidden by default."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from conftest import CORPUS

from mha_kit import settings
from mha_kit.grading.registry import run_checks
from mha_kit.messages import ids_in
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import forbidden_functions
from mha_kit.runner.worker import WorkerSubmission

sys.path.insert(0, str(CORPUS))
from forbidden_routes import FAILS, ROUTES, TEMPLATE, Route  # noqa: E402

FUSED = sorted(FAILS)
WITH_GRADIENTS = [r for r in ROUTES if r.gradients]
# ATen op names of attention kernels, their gradients and whole attention layers
ATTENTION_OP = re.compile(r"aten::\w*(attention|multi_head|transformer|_sdp_)\w*")


def written(route: Route, folder: Path) -> Path:
    path = folder / f"route_{ROUTES.index(route)}.py"
    path.write_text(route.source())
    return path


def assert_caught(results, api: str) -> None:
    assert {r.id for r in results if not r.passed} == FAILS
    for r in results:
        assert "runner.forbidden" in ids_in(r.message), f"{r.id}: {r.message}"
        assert r.message.params["api"] == api


def test_there_are_routes_enough():
    assert len(ROUTES) >= 6 and len({r.label for r in ROUTES}) == len(ROUTES)


def test_every_attention_op_of_torch_is_forbidden_by_default():
    """A kernel runs what it calls below the dispatcher's Python key, unseen: each op that
    computes attention must be named itself (`_transformer_encoder_layer_fwd` was not)."""
    ops = {name.split(".")[0] for name in torch._C._dispatch_get_all_op_names()
           if ATTENTION_OP.fullmatch(name.split(".")[0])}
    assert {"aten::_transformer_encoder_layer_fwd", "aten::_native_multi_head_attention",
            "aten::_scaled_dot_product_flash_attention_for_cpu"} <= ops
    assert ops - set(forbidden_functions()) == set()


@pytest.mark.parametrize("route", ROUTES, ids=[r.label for r in ROUTES])
def test_each_route_loses_the_checks_that_take_it(route: Route, tmp_path: Path):
    assert_caught(run_checks(InProcessSubmission.from_path(written(route, tmp_path)),
                             only=FUSED), route.api)


@pytest.mark.parametrize("route", WITH_GRADIENTS, ids=[r.label for r in WITH_GRADIENTS])
def test_each_route_is_right_once_allowed(route: Route, tmp_path: Path, monkeypatch):
    """What the watch takes is earned otherwise: with nothing forbidden, the route gives
    torch's values, so a module built on it would earn these checks (the contract check
    aside: the kernel applies no dropout to the weights the module returns)."""
    monkeypatch.setenv(settings.variable("forbidden"), "")
    results = run_checks(InProcessSubmission.from_path(written(route, tmp_path)), only=FUSED)
    assert {r.id for r in results if not r.passed} == {"fused_mha_contract"}


@pytest.mark.parametrize("route", [r for r in ROUTES if not r.gradients],
                         ids=[r.label for r in ROUTES if not r.gradients])
def test_a_kernel_without_gradients_is_attention_all_the_same(route: Route, tmp_path: Path,
                                                              monkeypatch):
    """Without a backward the kernel earns no check even allowed, yet it is attention: its
    module gives the template's values, without gradients (what a speed check times)."""
    monkeypatch.setenv(settings.variable("forbidden"), "")
    routed, honest = (InProcessSubmission.from_path(path).namespace["MultiHeadAttention"]
                      for path in (written(route, tmp_path), TEMPLATE))
    torch.manual_seed(0)
    module = routed(12, 3, kdim=5, vdim=7).eval()
    reference = honest(12, 3, kdim=5, vdim=7).eval()
    reference.load_state_dict(module.state_dict())
    query, key, value = torch.randn(2, 5, 12), torch.randn(2, 4, 5), torch.randn(2, 4, 7)
    mask = torch.rand(5, 4) > 0.6
    mask[:, 0] = False
    with torch.no_grad():
        got, want = (m(query, key, value, attn_mask=mask, need_weights=False)[0]
                     for m in (module, reference))
    torch.testing.assert_close(got, want)


def test_the_worker_watches_the_dispatcher_too(tmp_path: Path):
    hidden = next(r for r in ROUTES if "switched off" in r.label)
    with WorkerSubmission(written(hidden, tmp_path)) as sub:
        assert_caught(run_checks(sub, only=FUSED), hidden.api)


def test_the_worker_sees_a_layer_kernel_run_its_attention(tmp_path: Path):
    """Red team n11: the encoder layer's kernel runs the native attention below the watch."""
    layer = next(r for r in ROUTES if "TransformerEncoderLayer" in r.label)
    with WorkerSubmission(written(layer, tmp_path)) as sub:
        assert_caught(run_checks(sub, only=FUSED), layer.api)
