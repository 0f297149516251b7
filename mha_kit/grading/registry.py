"""The registry: every assignment's points table (`assignments/<name>/points.py`), and running
its checks. The CLI, the Gradescope JSON, pytest, nbgrader and the notebooks read it;
`release` writes the points into the notebooks' test cells.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import settings
from ..catalog import claimed_once, modules, reject
from ..checks.causes import ANSWERED, raised, runs_elsewhere
from ..checks.core import CheckFailed, CheckResult, Context, with_warnings
from ..checks.spec import CheckSpec
from ..messages import LANGUAGES, msg
from ..runner.protocol import StandIns, StudentCodeError, Submission


def _tables() -> dict[str, tuple[CheckSpec, ...]]:
    """Each assignment's points table; one without a table of CheckSpecs, or that declares
    another's check id again, is left out."""
    tables = {}
    for name, points in modules("points").items():
        checks = getattr(points, "CHECKS", None)
        if not (isinstance(checks, tuple) and checks
                and all(isinstance(c, CheckSpec) for c in checks)):
            reject(name, "points.py: CHECKS is not a tuple of CheckSpec")
            continue
        tables[name] = checks
    return claimed_once(tables, lambda table: (c.id for c in table),
                        "points.py redeclares check ids")


# One table per assignment (its package, and its folder under solutions/ and assignments/).
ASSIGNMENTS: dict[str, tuple[CheckSpec, ...]] = _tables()

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


def assignment_names() -> tuple[str, ...]:
    """Every assignment and edition by its name: each assignment, then its editions."""
    return tuple(name for a in ASSIGNMENTS for name in (a, *(edition_name(a, lang)
                                                             for lang in EDITION_LANGUAGES)))


def assignment_folders(assignment: str) -> set[str]:
    """The names of an assignment's folders in nbgrader's layout: its own and its editions'
    (`mha`, `mha_zh`)."""
    return {assignment, *(edition_name(assignment, lang) for lang in EDITION_LANGUAGES)}


SPECS: dict[str, CheckSpec] = {c.id: c for table in ASSIGNMENTS.values() for c in table}
POINTS: dict[str, int] = {check_id: spec.points for check_id, spec in SPECS.items()}
ASSIGNMENT_OF: dict[str, str] = {c.id: name for name, table in ASSIGNMENTS.items() for c in table}


def own_checks(spec: CheckSpec, name: str) -> list[str]:
    """The checks before `spec` in its table that use the piece `name`: its own checks."""
    table = ASSIGNMENTS[ASSIGNMENT_OF[spec.id]]
    return [s.id for s in table[:table.index(spec)] if name in s.uses]

# The module of an assignment's stand-ins (CheckSpec.stand_ins).
STAND_INS = "mha_kit.assignments.{}.standins"
# The message of a check that waits for the checks it needs.
WAITING_MESSAGES = {spec.id: msg(spec.waiting) for spec in SPECS.values() if spec.needs}


def run_check(check_id: str, sub: Submission, ctx: Context | None = None) -> CheckResult:
    """Run one check; whatever the student's code does, return a result.

    A check that needs or consults others runs them first, unless `ctx` has their results
    already, and scores 0 while any it needs fails.
    """
    ctx = ctx or Context()
    spec = SPECS[check_id]
    for other in spec.consults:
        if other not in ctx.results:
            run_check(other, sub, ctx)
    failing = [need for need in spec.needs
               if not (ctx.results.get(need) or run_check(need, sub, ctx)).passed]
    replaced = _failing_pieces(spec, sub, ctx)
    waiting = WAITING_MESSAGES.get(check_id)
    if set(spec.uses) <= replaced.keys():  # the kit's code alone would be graded
        failing += [replaced[name] for name in spec.uses]  # each piece's failing checks
        waiting = msg("waiting.stand_ins", pieces=", ".join(f"`{n}`" for n in spec.uses))
        replaced = {}
    ctx.notes = None
    sub.start_check(check_id)
    picture = None
    answered = ANSWERED.set(frozenset(ctx.answered))
    try:
        if failing:
            replaced = {}  # nothing of the student's runs while it waits
            raise CheckFailed(msg("waiting.failing", what=waiting, checks=", ".join(failing)))
        if replaced:
            sub.stand_in(StandIns(STAND_INS.format(ASSIGNMENT_OF[check_id]), tuple(replaced)))
        fraction = spec.function(sub, ctx)
        message = ctx.notes or msg("ok")
        ctx.answered |= set(spec.uses)
    except CheckFailed as err:
        err.warnings = list(getattr(sub, "warnings", []))
        fraction, message, picture = 0.0, err.message, err.picture
        if not failing:  # some case ran, or failed in a way of its own
            ctx.answered |= set(spec.uses)
    except StudentCodeError as err:
        if runs_elsewhere(err):  # not a stub: it runs in other checks
            err = StudentCodeError(err.kind, msg("cause.not_implemented_in_check",
                                                 raised=raised(err)))
        fraction, message = 0.0, with_warnings(err.message, list(getattr(sub, "warnings", [])))
        if err.kind in ("missing", "not_implemented", "load"):  # no code of theirs ran here
            replaced = {}
    finally:
        ANSWERED.reset(answered)
        sub.stand_in(None)
    replaced = {name: checks for name, checks in replaced.items()
                if name in sub.stand_ins_ran}  # a piece the graded code never called: no note
    if replaced:
        message = msg("standin.note", text=message, pieces=", ".join(
            f"`{name}`" for name in replaced), checks=", ".join(replaced.values()))
    result = CheckResult(check_id, round(spec.points * fraction, 2), spec.points, message,
                         picture)
    ctx.results[check_id] = result
    return result


def _failing_pieces(spec: CheckSpec, sub: Submission, ctx: Context) -> dict[str, str]:
    """The pieces among `spec.stand_ins` that fail one of their own checks (run first where
    `ctx` has no result yet), each with those checks' ids: the kit's versions stand in."""
    failing = {}
    for name in spec.stand_ins:
        failed = [own for own in own_checks(spec, name)
                  if not (ctx.results.get(own) or run_check(own, sub, ctx)).passed]
        if failed:
            failing[name] = ", ".join(failed)
    return failing


def run_checks(sub: Submission, only: list[str] | None = None, device: str = "cpu",
               on_result: Callable[[CheckResult], None] | None = None,
               assignment: str | None = None, salt: str = "") -> list[CheckResult]:
    """Run an assignment's checks (None: the `default_assignment` setting's) in points-table
    order (all of them, or those in `only`), on the inputs of `salt` (see `Context`)."""
    assignment = assignment or settings.current().default_assignment
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
    for spec in SPECS.values():
        for other in spec.consults:
            if other not in {c.id for c in ASSIGNMENTS[ASSIGNMENT_OF[spec.id]]}:
                raise ValueError(f"{spec.id} consults {other!r}, not a check of its table")
        for piece in spec.stand_ins:  # graded first, by other checks
            if not own_checks(spec, piece):
                raise ValueError(f"{spec.id}: no check before it grades {piece!r}")


_totals_are_100()
