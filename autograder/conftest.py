"""`pytest autograder --submission PATH`: the checks as pytest tests."""

from __future__ import annotations

import pytest

from .checks import Context


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mha-kit")
    group.addoption("--submission", metavar="PATH", help="the .py or .ipynb file to grade")
    group.addoption("--device", default=None, choices=("cpu", "cuda"),
                    help="where to run and time (default: cuda when available)")


@pytest.fixture(scope="session")
def submission(request: pytest.FixtureRequest):
    from .worker import WorkerSubmission

    path = request.config.getoption("--submission")
    if not path:
        pytest.skip("no --submission PATH given")
    with WorkerSubmission(path, _device(request)) as sub:
        yield sub


@pytest.fixture(scope="session")
def context(request: pytest.FixtureRequest) -> Context:
    return Context(device=_device(request))


def _device(request: pytest.FixtureRequest) -> str:
    from .cli import default_device

    return request.config.getoption("--device") or default_device()
