"""The forbidden-API watch sees every route to the attention kernel, not only the functions of
`torch.nn.functional`: each route of tests/corpus/forbidden_routes.py loses the checks of the
module that takes it, with the name a student knows, in process and through the worker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import CORPUS

from autograder import settings
from autograder.grading.registry import run_checks
from autograder.messages import ids_in
from autograder.runner.inprocess import InProcessSubmission
from autograder.runner.worker import WorkerSubmission

sys.path.insert(0, str(CORPUS))
from forbidden_routes import FAILS, ROUTES, Route  # noqa: E402

FUSED = sorted(FAILS)


def written(route: Route, folder: Path) -> Path:
    path = folder / f"route_{ROUTES.index(route)}.py"
    path.write_text(route.source())
    return path


def assert_caught(results) -> None:
    assert {r.id for r in results if not r.passed} == FAILS
    for r in results:
        assert "runner.forbidden" in ids_in(r.message), f"{r.id}: {r.message}"
        assert r.message.params["api"] == "F.scaled_dot_product_attention"


def test_there_are_routes_enough():
    assert len(ROUTES) >= 6 and len({r.label for r in ROUTES}) == len(ROUTES)


@pytest.mark.parametrize("route", ROUTES, ids=[r.label for r in ROUTES])
def test_each_route_loses_the_checks_that_take_it(route: Route, tmp_path: Path):
    assert_caught(run_checks(InProcessSubmission.from_path(written(route, tmp_path)),
                             only=FUSED))


@pytest.mark.parametrize("route", ROUTES, ids=[r.label for r in ROUTES])
def test_each_route_is_right_once_allowed(route: Route, tmp_path: Path, monkeypatch):
    """What the watch takes is earned otherwise: with nothing forbidden, the route gives
    torch's values, so a module built on it would earn these checks (the contract check
    aside: the kernel applies no dropout to the weights the module returns)."""
    monkeypatch.setenv(settings.variable("forbidden"), "")
    results = run_checks(InProcessSubmission.from_path(written(route, tmp_path)), only=FUSED)
    assert {r.id for r in results if not r.passed} == {"fused_mha_contract"}


def test_the_worker_watches_the_dispatcher_too(tmp_path: Path):
    hidden = next(r for r in ROUTES if "switched off" in r.label)
    with WorkerSubmission(written(hidden, tmp_path)) as sub:
        assert_caught(run_checks(sub, only=FUSED))
