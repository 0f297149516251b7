"""Several failing cases of one check, told apart by cause.

After the shape search and the fixed cases a check may have failed in more than one way: code
that raises on cross-attention and gives wrong values on self-attention, a path left
unimplemented. `verdict` turns the failing cases into the one failure the student reads:
each distinct cause once, the most informative first, and a known mistake named only when
it reproduces every failing case it is named for. Each cause is told with the kind of case it
happens on (`_where`): what its cases share, read off their `traits`, and no other case has.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ..messages import Message, joined, msg
from ..runner.protocol import StudentCodeError
from .core import CheckFailed

Failure = tuple[Any, CheckFailed | StudentCodeError]  # a case, and how it failed
MAX_LABELS = 3  # the cases an error is told on by name; past that, the first (the smallest)
# The contract names that ran in an earlier check of this grading (`grading.registry` sets it):
# one that raises NotImplementedError on every case of a check is half finished, not a stub.
ANSWERED: ContextVar[frozenset[str]] = ContextVar("answered", default=frozenset())


def verdict(failures: list[Failure], passed: list[Any]) -> CheckFailed | StudentCodeError:
    """The failure to report for a check's failing cases (in the order met: the search's
    smallest first), beside the cases that `passed`."""
    first = failures[0][1]
    if not passed and all(isinstance(err, StudentCodeError) for _, err in failures):
        if runs_elsewhere(first):  # half finished: say which kinds of case it leaves out
            labels = _distinct([label(case) for case, _ in failures])
            return CheckFailed(msg("cause.not_implemented_here", raised=raised(first),
                                   cases=labels[:MAX_LABELS]))
        return first  # a stub: not implemented for any case
    failed = [(case, as_check_failed(case, err)) for case, err in failures]
    diagnosed = [(case, f) for case, f in failed if f.diagnosis is not None]
    everywhere = _agreed([f for _, f in diagnosed])
    groups: dict[tuple[str, str], list[tuple[Any, CheckFailed]]] = {}
    if everywhere:  # one known mistake reproduces every failing case it can be tried on
        groups[("mistake", "")] = diagnosed
    for case, err in failed:
        if not (everywhere and err.diagnosis is not None):
            groups.setdefault(_cause(err), []).append((case, err))
    for key, members in groups.items():
        if members[0][1].diagnosis is not None:
            members[0][1].diagnosis.agreed = _agreed([f for _, f in members])
            members[0][1].diagnosis.together = [f.diagnosis for _, f in members
                                                if f.diagnosis is not None]
        labels = _distinct([label(case) for case, _ in members])
        if key[0] == "raised" and 1 < len(labels) <= MAX_LABELS:  # each case it raises on
            members[0][1].case = labels
    if len(groups) == 1:
        (key, members), = groups.items()
        first = members[0][1]
        if key[0] != "raised":
            return first
        where = _where([case for case, _ in members], passed)  # the kind of case that raises
        return first if where is None else CheckFailed(
            msg("cause.on", where=where, text=first.summary), first.picture,
            drawing=first.drawing, exc_type=first.exc_type)
    ordered = sorted(groups.items(), key=_rank)
    parts = []
    for n, (key, members) in enumerate(ordered, start=1):
        others = [case for k, m in ordered if k != key for case, _ in m]
        where = _where([case for case, _ in members], others)
        text = members[0][1].summary
        parts.append(msg("cause.item", n=n, text=text) if where is None
                     else msg("cause.item_on", n=n, where=where, text=text))
    causes = parts[0]
    for part in parts[1:]:
        causes = msg("cause.then", first=causes, second=part)
    reps = [members[0][1] for _, members in ordered]
    return CheckFailed(msg("cause.several", count=len(parts), causes=causes),
                       next((r.picture for r in reps if r.picture is not None), None),
                       drawing=next((r.drawing for r in reps if r.drawing is not None), None))


def _distinct(labels: list[Message | str]) -> list[Message | str]:
    found: list[Message | str] = []
    for named in labels:
        if named not in found:  # a Message is not hashable
            found.append(named)
    return found


def runs_elsewhere(err: StudentCodeError) -> bool:
    """A NotImplementedError from code that ran in an earlier check (`ANSWERED`)."""
    name = err.message.params.get("name", "") if err.kind == "not_implemented" else ""
    return bool(name) and name.split(".")[0] in ANSWERED.get()


def raised(err: StudentCodeError) -> Message | str:
    """A NotImplementedError as any other error is told, with its line and text: the runner's
    sentence (`runner.not_implemented`'s `raised`), else the message itself."""
    return err.message.params.get("raised") or err.message


def label(case: Any) -> Message | str:
    """A case, for a message: its label, or its parts' labels. The data a case carries beside
    its label (the keyword arguments of a call, a mask) is not shown: a tensor's text names
    no case."""
    if hasattr(case, "label"):
        return case.label()
    if isinstance(case, tuple):
        return joined([label(part) for part in case if _labels(part)])
    return case if isinstance(case, Message) else str(case)


def _labels(part: Any) -> bool:
    return hasattr(part, "label") or isinstance(part, (Message, str, int, tuple))


def as_check_failed(case: Any, err: CheckFailed | StudentCodeError) -> CheckFailed:
    """A case's failure as a check's: an error of the student's code told with its case (a
    NotImplementedError with its line and text, as any other error)."""
    if isinstance(err, CheckFailed):
        return err
    text: Message = err.message
    if text.id == "runner.not_implemented":  # some cases work: this one raises
        text = msg("cause.not_implemented", raised=raised(err))
    return CheckFailed(text, case=label(case), exc_type=err.exc_type or err.kind)


def _agreed(failed: list[CheckFailed]) -> tuple[str, ...]:
    """The known mistakes (with their variant) that reproduce every one of these failures."""
    if not failed or any(f.diagnosis is None for f in failed):
        return ()
    return tuple(key for key in failed[0].diagnosis.matches
                 if all(f.diagnosis.reproduces(key) for f in failed[1:]))


def _cause(err: CheckFailed) -> tuple[str, str]:
    if err.exc_type:
        return "raised", err.exc_type
    if err.diagnosis is not None:
        return "values", ""
    return "other", err.text.id if isinstance(err.text, Message) else str(err.text)


def _rank(group: tuple[tuple[str, str], list[tuple[Any, CheckFailed]]]) -> int:
    """Errors raised first (a line to look at), then a mistake that explains every case it
    can be tried on, then a named mistake, then the rest."""
    (kind, _), members = group
    if kind in ("mistake", "raised"):
        return 0 if kind == "raised" else 1
    diagnosis = members[0][1].diagnosis
    return 2 if diagnosis is not None and diagnosis.mistake is not None else 3


def _traits(case: Any) -> list[tuple[str, Message | str]]:
    if isinstance(case, tuple) and case:
        if isinstance(case[0], (Message, str)):  # (label, ...): a case named by its label
            return [("case", case[0])]
        case = case[0]
    return case.traits() if hasattr(case, "traits") else []


def _where(cases: list[Any], others: list[Any]) -> Message | str | None:
    """What these cases share and none of `others` has (cross-attention, a mask, ...)."""
    if not others:
        return None
    for key, value in _traits(cases[0]):  # compared as data (ids and values), not as words
        same = all(dict(_traits(c)).get(key, "") == value for c in cases)
        if same and all(dict(_traits(c)).get(key, "") != value for c in others):
            return value
    return None
