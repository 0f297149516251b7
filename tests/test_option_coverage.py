"""Every option of every contract module is varied by its checks: each keyword with a default,
in the constructor and in forward, is passed at least once with another value than the
default (or left out, where the checks always pass it), read off the contract's signatures."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import torch
from conftest import DETERMINISTIC, TEMPLATE

from mha_kit.assignments.mha.contract import MODULES
from mha_kit.catalog import Entry
from mha_kit.grading.registry import run_checks
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.protocol import ModuleRun

LEFT_OUT = "left out"


def options(signature: str) -> list[tuple[str, int | None, Any]]:
    """(name, position or None for keyword-only, default) of each parameter with a default."""
    args = ast.parse(f"def {signature}: pass").body[0].args
    positional = args.posonlyargs + args.args
    found = [(a.arg, i, ast.literal_eval(d)) for i, (a, d) in enumerate(
        zip(positional[len(positional) - len(args.defaults):], args.defaults),
        start=len(positional) - len(args.defaults))]
    found += [(a.arg, None, ast.literal_eval(d)) for a, d in zip(args.kwonlyargs,
                                                                  args.kw_defaults)]
    return found


def _value(value: Any) -> Any:
    return "a tensor" if isinstance(value, torch.Tensor) else value


def seen(runs: list[ModuleRun], entry: Entry) -> dict[str, set]:
    """Each option's values across the runs of one module ("left out" where not passed)."""
    values: dict[str, set] = {}
    for name, _, _ in options(entry.signature):
        values[f"{entry.name}({name})"] = {
            _value(r.init_kwargs.get(name, LEFT_OUT)) for r in runs}
    for name, position, _ in options(entry.forward):  # positions as in forward_args
        values[f"{entry.name}.forward({name})"] = {
            _value(r.forward_kwargs[name]) if name in r.forward_kwargs
            else _value(r.forward_args[position])
            if position is not None and position < len(r.forward_args)
            else LEFT_OUT for r in runs}
    return values


@pytest.fixture(scope="module")
def module_runs() -> list[ModuleRun]:
    runs: list[ModuleRun] = []

    class Recording(InProcessSubmission):
        def run_module(self, run: ModuleRun):
            runs.append(run)
            return super().run_module(run)

    run_checks(Recording.from_path(TEMPLATE), only=DETERMINISTIC)
    return runs


def unvaried(runs: list[ModuleRun]) -> list[str]:
    return [option for entry in MODULES
            for option, values in seen([r for r in runs if r.class_name == entry.name],
                                       entry).items() if len(values) < 2]


def test_the_checks_vary_every_option_of_every_module(module_runs):
    assert unvaried(module_runs) == []


def test_a_module_whose_checks_never_vary_an_option_is_found(module_runs):
    """A planted gap: the looped module's runs without is_causal=True."""
    planted = [r for r in module_runs if not (r.class_name == "LoopedMultiHeadAttention"
                                               and r.forward_kwargs.get("is_causal"))]
    assert unvaried(planted) == ["LoopedMultiHeadAttention.forward(is_causal)"]
