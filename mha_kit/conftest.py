"""`pytest mha_kit --submission PATH`: the checks as pytest tests, for any assignment."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import settings
from .checks.core import Context
from .grading.files import detect_assignment
from .grading.registry import ASSIGNMENTS
from .runner.worker import WorkerSubmission
from .runtime import default_device


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mha-kit")
    group.addoption("--submission", metavar="PATH", help="the .py or .ipynb file to grade")
    group.addoption("--assignment", choices=tuple(ASSIGNMENTS),
                    help="which checks (default: from a notebook's test cells or the names a "
                         ".py file defines, else mha)")
    group.addoption("--device", default=None, choices=("cpu", "cuda"),
                    help="where to run and time (default: cuda when available)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per check of the submission's assignment, in points-table order."""
    if "check_id" in metafunc.fixturenames:
        config = metafunc.config
        path = config.getoption("--submission")
        assignment = config.getoption("--assignment") or (
            detect_assignment(Path(path)) if path else settings.current().default_assignment)
        metafunc.parametrize("check_id", [spec.id for spec in ASSIGNMENTS[assignment]])


@pytest.fixture(scope="session")
def submission(request: pytest.FixtureRequest):
    path = request.config.getoption("--submission")
    if not path:
        pytest.skip("no --submission PATH given")
    with WorkerSubmission(path, _device(request)) as sub:
        yield sub


@pytest.fixture(scope="session")
def context(request: pytest.FixtureRequest) -> Context:
    return Context(device=_device(request))


def _device(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--device") or default_device()
