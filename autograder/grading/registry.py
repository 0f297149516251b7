"""The registry: every graded check, declared once with its points, in one table per
assignment. The CLI, the Gradescope JSON, pytest, nbgrader and the notebooks read it;
`release` writes the points into the notebooks' test cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..checks import extensions, modules, shapes, steps
from ..checks.core import CheckFailed, CheckResult, Context
from ..messages import LANGUAGES, msg
from ..runner.protocol import StudentCodeError, Submission
from ..speed import gate

CheckFunction = Callable[[Submission, Context], float]


@dataclass(frozen=True)
class CheckSpec:
    """A graded check: its stable id, its points, the contract names it exercises, the function
    that grades it, and the checks it relies on (it is not run until they pass)."""

    id: str
    points: int
    uses: tuple[str, ...]
    function: CheckFunction
    needs: tuple[str, ...] = ()


SPEED_CHECK = "speed_fused_vs_looped"  # the timed check: the same inputs, hidden or not
_FUSED = ("MultiHeadAttention",)
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("split_heads", 7, ("split_heads",), steps.check_split_heads),
    CheckSpec("scaled_scores", 7, ("scaled_scores",), steps.check_scaled_scores),
    CheckSpec("causal_mask", 6, ("causal_mask",), steps.check_causal_mask),
    CheckSpec("attend", 10, ("attend",), steps.check_attend),
    CheckSpec("merge_heads", 7, ("merge_heads",), steps.check_merge_heads),
    CheckSpec("output_projection", 6, ("output_projection",), steps.check_output_projection),
    CheckSpec("attention_head", 8, ("AttentionHead",), modules.check_attention_head),
    CheckSpec("looped_mha", 12, ("LoopedMultiHeadAttention",), modules.check_looped_mha),
    CheckSpec("fused_mha", 15, _FUSED, modules.check_fused_mha),
    CheckSpec("fused_mha_masks", 6, _FUSED, modules.check_fused_mha_masks),
    CheckSpec("fused_mha_contract", 6, _FUSED, modules.check_fused_mha_contract),
    # The timing calls forward(x, is_causal=True, need_weights=False): its values must be
    # right first, or a wrong output would read as a timing that skips work.
    CheckSpec(SPEED_CHECK, 10, _FUSED, gate.check_speed,
              needs=("fused_mha", "fused_mha_masks")),
)

_GENERAL = ("GeneralMultiHeadAttention",)
EXTENSION_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("ext_self_attention", 20, _GENERAL, extensions.check_self_attention),
    CheckSpec("ext_cross_dims", 20, _GENERAL, extensions.check_cross_dims),
    CheckSpec("ext_qk_v_head_dims", 20, _GENERAL, extensions.check_qk_v_head_dims),
    CheckSpec("ext_causal_buffer", 20, _GENERAL, extensions.check_causal_buffer),
    CheckSpec("ext_dropout", 10, _GENERAL, extensions.check_dropout),
    CheckSpec("ext_size_errors", 10, _GENERAL, extensions.check_size_errors),
)

SHAPES_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("shapes_split_view", 20, ("split_heads_view",), shapes.check_split_view),
    CheckSpec("shapes_merge", 20, ("merge_heads_transpose",), shapes.check_merge),
    CheckSpec("shapes_rearrange", 20, ("split_heads_rearrange", "merge_heads_rearrange"),
              shapes.check_rearrange),
    CheckSpec("shapes_view_quiz", 20, ("view_quiz",), shapes.check_view_quiz),
    CheckSpec("shapes_roundtrip", 20, ("split_heads_view", "merge_heads_transpose"),
              shapes.check_roundtrip),
)

# One table per assignment (the folder name under solutions/ and assignments/).
ASSIGNMENTS: dict[str, tuple[CheckSpec, ...]] = {
    "mha": CHECKS,
    "mha_extensions": EXTENSION_CHECKS,
    "shapes": SHAPES_CHECKS,
}

# An edition of an assignment in another language is an assignment of its own to nbgrader, in
# folders of its own, named `<assignment>_<lang>` (`mha_zh`); it shares its master's table.
EDITION_LANGUAGES = tuple(lang for lang in LANGUAGES if lang != "en")


def edition_name(assignment: str, lang: str) -> str:
    return f"{assignment}_{lang}"


def split_name(name: str) -> tuple[str, str | None]:
    """'shapes_zh' -> ('shapes', 'zh'); 'shapes' -> ('shapes', None)."""
    for lang in EDITION_LANGUAGES:
        base = name.removesuffix(f"_{lang}")
        if base != name and base in ASSIGNMENTS:
            return base, lang
    return name, None


def assignment_folders(assignment: str) -> set[str]:
    """The names of an assignment's folders in nbgrader's layout: its own and its editions'
    (`mha`, `mha_zh`)."""
    return {assignment, *(edition_name(assignment, lang) for lang in EDITION_LANGUAGES)}


SPECS: dict[str, CheckSpec] = {c.id: c for table in ASSIGNMENTS.values() for c in table}
POINTS: dict[str, int] = {check_id: spec.points for check_id, spec in SPECS.items()}

# The message of a check that waits for the checks it needs.
GATE_MESSAGES = {SPEED_CHECK: msg("gate.speed")}


def run_check(check_id: str, sub: Submission, ctx: Context | None = None) -> CheckResult:
    """Run one check; whatever the student's code does, return a result.

    A check that needs others runs them first, unless `ctx` has their results already, and
    scores 0 while any of them fails.
    """
    ctx = ctx or Context()
    spec = SPECS[check_id]
    failing = [need for need in spec.needs
               if not (ctx.results.get(need) or run_check(need, sub, ctx)).passed]
    ctx.notes = None
    sub.start_check(check_id)
    picture = None
    try:
        if failing:
            raise CheckFailed(msg("gate.failing", gate=GATE_MESSAGES[check_id],
                                  checks=", ".join(failing)))
        fraction = spec.function(sub, ctx)
        message = ctx.notes or msg("ok")
    except CheckFailed as err:
        err.warnings = list(getattr(sub, "warnings", []))
        fraction, message, picture = 0.0, err.message, err.picture
    except StudentCodeError as err:
        fraction, message = 0.0, err.message
        for warned in getattr(sub, "warnings", []):
            message = msg("check.warned", text=message, warned=warned)
    result = CheckResult(check_id, round(spec.points * fraction, 2), spec.points, message,
                         picture)
    ctx.results[check_id] = result
    return result


def run_checks(sub: Submission, only: list[str] | None = None, device: str = "cpu",
               on_result: Callable[[CheckResult], None] | None = None,
               assignment: str = "mha", salt: str = "") -> list[CheckResult]:
    """Run an assignment's checks in points-table order (all of them, or those in `only`),
    on the inputs of `salt` (see `Context`)."""
    ctx = Context(device=device, salt=salt)
    results = []
    for spec in ASSIGNMENTS[assignment]:
        if only and spec.id not in only:
            continue
        result = run_check(spec.id, sub, ctx)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def _totals_are_100() -> None:
    for name, table in ASSIGNMENTS.items():
        total = sum(c.points for c in table)
        if total != 100:
            raise ValueError(f"the points table of {name!r} must total 100, not {total}")
    if len(SPECS) != sum(map(len, ASSIGNMENTS.values())):
        raise ValueError("check ids must be unique across the tables")


_totals_are_100()
