"""Shared paths and helpers for the kit's own tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
TEMPLATE = CORPUS / "template.py"
STUBS = CORPUS / "stubs.py"


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mha-kit ...` as a user runs it, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )


@pytest.fixture
def cli():
    return run_cli
