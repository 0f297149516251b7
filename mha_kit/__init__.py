"""mha-kit's grader: multi-head attention exercises checked against PyTorch.

The public API, for scripts, the kit's tests and other tools (the CLI is `mha-kit`):

- `grade_submission(path)`: grade one file in an isolated worker, as `mha-kit check` does;
- `run_check`, `run_checks`: run checks against any `Submission`;
- `InProcessSubmission`, `WorkerSubmission`: where the student's code runs;
- `ASSIGNMENTS`, `POINTS`: the points tables; `CheckResult`: what a check gives back;
- `Limits`: what student code may take; `StudentCodeError`: how its failures are reported.

Names load on first use, so `import mha_kit` stays light.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# jsonschema, which nbformat imports, imports `rfc3987_syntax` where it is installed (Jupyter's
# packages bring it), and that compiles 38 grammars at import: 3 s in every process that reads a
# notebook, for the string format "iri", which no notebook schema uses. The kit's processes
# (the CLI, nbgrader's autograde under the kit, their job processes) do without it.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

_PUBLIC = {
    "grade_submission": "grading.batch",
    "run_check": "grading.registry",
    "run_checks": "grading.registry",
    "ASSIGNMENTS": "grading.registry",
    "POINTS": "grading.registry",
    "CheckResult": "checks.core",
    "Context": "checks.core",
    "InProcessSubmission": "runner.inprocess",
    "WorkerSubmission": "runner.worker",
    "Limits": "runner.policy",
    "StudentCodeError": "runner.protocol",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'mha_kit' has no attribute {name!r}")
    module, _, attribute = _PUBLIC[name].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute or name)
