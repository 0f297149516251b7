"""Every sentence a student or instructor reads, by id, with an English and a Chinese template.

Code builds `Message(id, params)`; the text is rendered only when it is shown, in the
language of the `lang` setting (`mha_kit.settings`; `mha-kit check --lang`). Templates use
`str.format` fields; a parameter may itself be a `Message` (rendered in the same language), a
list of them (joined with the language's separator), or a plain value (code, numbers, shapes:
shown as it is; a format spec such as `{ms:.2f}` applies to it).

Rendered text pads by display width in a format spec such as `{label:<8}` (a CJK character
counts twice), so columns line up in Chinese too; `pad` and `display_width` do the same for
code that lays out a table, and `wrap_lines` breaks text into lines of so many columns.
`joined(parts)` lists parts with the language's comma.

Each assignment adds the sentences of its own checks (`assignments/<name>/messages.py`).
Ids are `area.name`: `check.*`, `case.*`, `shape.*`, ... for the shared checks (en_checks.py),
`mistake.<id>` for the known mistakes (en_mistakes.py), `runner.*`, `load.*`, `worker.*`,
`sandbox.*` for the runner (en_runner.py), `grad.*` and `device.*` for the gradient and
device checks (en_gradients.py), and `speed.*`, `report.*`, `batch.*`, `cli.*`, ... in en.py. Each
id has a template in every language, with the same fields (zh*.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from string import Formatter
from typing import Any

from .. import settings
from ..catalog import claimed_once, modules, reject
from ..settings import LANGUAGES
from . import en, zh

LANG_VARIABLE = settings.variable("lang")  # what an edition's language cell sets in its kernel


def _all_templates() -> dict[str, dict[str, str]]:
    """The shared templates and every assignment's (`assignments/<name>/messages.py`); an id
    is declared once: an assignment that declares one again is left out (`catalog.reject`)."""
    templates = {"en": dict(en.TEMPLATES), "zh": dict(zh.TEMPLATES)}
    found = {}
    for name, module in modules("messages").items():
        try:
            found[name] = {lang: dict(module.TEMPLATES[lang]) for lang in LANGUAGES}
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            reject(name, f"messages.py: TEMPLATES needs {', '.join(LANGUAGES)} ({err!r})")
    shared = set().union(*templates.values())
    for theirs in claimed_once(found, lambda t: set().union(*t.values()),
                               "messages.py redeclares message ids", shared).values():
        for lang in LANGUAGES:
            templates[lang].update(theirs[lang])
    return templates


TEMPLATES: dict[str, dict[str, str]] = _all_templates()
SEPARATORS = {"en": "; ", "zh": "；"}
PLAIN = (str, int, float, bool, type(None))
# What `from_data` accepts: a message read from another process is bounded in every direction.
MAX_DEPTH, MAX_PARAMS, MAX_ITEMS = 6, 16, 64


def language() -> str:
    """The language of messages: the `lang` setting's."""
    return settings.current().lang


@dataclass(frozen=True)
class Message:
    """One message: a template id and the values to fill it with."""

    id: str
    params: dict[str, Any] = field(default_factory=dict)

    def render(self, lang: str | None = None) -> str:
        lang = lang or language()
        values = {k: _render_value(v, lang) for k, v in self.params.items()}
        return TEMPLATES[lang][self.id].format(**values)

    def __str__(self) -> str:
        return self.render()

    def to_data(self) -> dict[str, Any]:
        """Plain data for a pipe or a file: ids, strings and numbers only."""
        return {"id": self.id, "params": {k: _to_data(v) for k, v in self.params.items()}}

    @classmethod
    def from_data(cls, data: Any, text: Callable[[str], str] | None = None,
                  keep: int | None = None) -> Message:
        """A message read back from `to_data`; anything malformed raises ValueError: an unknown
        id, other values than `to_data` writes, too deep or too many of them, parameters that
        do not render in every language, or (with `keep`) a text longer than `keep`
        characters. `text`, if given, rewrites every string parameter first (to make text
        from another process safe to show)."""
        message = _message_from_data(data, 0, text or str)
        for lang in LANGUAGES:
            try:
                shown = message.render(lang)
            except (KeyError, IndexError, ValueError, TypeError, AttributeError) as err:
                raise ValueError(f"message {message.id!r} does not render: {err!r}") from None
            if keep is not None and len(shown) > keep:
                raise ValueError(f"message {message.id!r} is longer than {keep} characters")
        return message


def msg(message_id: str, **params: Any) -> Message:
    """A message; an unknown id or a missing field fails at once, where it is written."""
    if message_id not in TEMPLATES["en"]:
        raise KeyError(f"no message {message_id!r} in messages/en.py")
    missing = fields(TEMPLATES["en"][message_id]) - set(params)
    if missing:
        raise KeyError(f"message {message_id!r} needs {', '.join(sorted(missing))}")
    return Message(message_id, params)


def joined(parts: list[Any]) -> Any:
    """Parts (messages or plain text) in one message, separated by the language's comma; empty
    parts are left out, and one part is itself."""
    parts = [p for p in parts if p not in ("", None)]
    if not parts:
        return ""
    result = parts[0]
    for part in parts[1:]:
        result = Message("join.comma", {"first": result, "second": part})
    return result


@cache
def fields(template: str) -> frozenset[str]:
    """The names of a template's fields, those nested in a format spec included."""
    names: set[str] = set()
    for _, name, spec, _ in Formatter().parse(template):
        if name is not None:
            names.add(re.split(r"[.\[]", name, maxsplit=1)[0])
        if spec:
            names |= fields(spec)
    return frozenset(names)


def display_width(text: str) -> int:
    """Columns a terminal gives `text`: two for each wide (CJK) character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


class DisplayText(str):
    """Rendered text: a width in its format spec counts display columns, not characters."""

    def __format__(self, spec: str) -> str:
        found = re.fullmatch(r"(.?[<>^])?(\d+)", spec)
        if found:
            width = int(found[2]) - (display_width(self) - len(self))
            spec = f"{found[1] or ''}{max(width, 0)}"
        return str.__format__(self, spec)


def pad(text: str, width: int, align: str = "<") -> str:
    """`text` padded to `width` display columns: `align` is "<", ">" or "^"."""
    return format(DisplayText(text), f"{align}{width}")


# Code that a line breaks only where it is wider than a line: `spans`, calls such as
# torch.triu(..., diagonal=1) (one level of nested parentheses, and the assignment before it:
# scores = scores.masked_fill(...)), and shapes such as (B, H, T, D).
_CODE = (r"`[^`]*`|(?:\w+ = )?[\w.\]]+\((?:[^()]|\([^()]*\))*\)"
         r"|\((?:[^()\s]+, )+[^()\s]+\)")
_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_OPENING = "“‘（《「『【〈"  # Chinese punctuation that never ends a line
_CLOSING = "”’，。、；：？！）》」』】〉…"  # nor starts one
_RUN = rf"(?:{_CODE}|[^\s{_IDEOGRAPHS}{_OPENING}{_CLOSING}])+"  # a word, code, a number
# What a line may break between: white space, and each Chinese character or run of anything
# else, with the punctuation before and after it.
_TOKEN = re.compile(rf"\s+|[{_OPENING}]*(?:[{_IDEOGRAPHS}]|{_RUN})[{_CLOSING},.;:!?)]*"
                    rf"|[{_OPENING}{_CLOSING}]")


def wrap_lines(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` in lines of at most `width` display columns, the first after `first`, every other
    after `rest`. Lines break at white space and between Chinese characters (never next to
    the punctuation that belongs to one), never inside a word, and inside code only where
    the code is wider than a line; a word wider than a line has one to itself. White space
    inside a line is kept (a drawn mask's columns), and a line of `text` that starts with
    spaces keeps them on each line it is broken into."""
    lines: list[str] = []
    for number, line in enumerate(text.splitlines() or [""]):
        margin = " " * (len(line) - len(line.lstrip(" ")))
        lines += _fill(line.lstrip(" "), width, (first if number == 0 else rest) + margin,
                       rest + margin)
    return lines


def _fill(line: str, width: int, prefix: str, rest: str) -> list[str]:
    """One line of text after `prefix`, broken into lines of `width` columns after `rest`."""
    indent = display_width(rest)
    tokens = _TOKEN.findall(line)[::-1]  # a stack: the next token last
    lines: list[str] = []
    current, empty = prefix, True  # the line being filled, which holds no word yet
    while tokens:
        token = tokens.pop()
        if token.isspace():
            current += "" if empty else token
        elif display_width(token) > width - indent and re.search(r"\s", token):
            tokens += re.split(r"(\s+)", token)[::-1]  # code wider than a line: at its spaces
        elif (display_width(current + token) <= width
              or empty and display_width(current) <= indent):
            current, empty = current + token, False
        else:
            lines.append(current.rstrip())
            current, empty = rest, True
            tokens.append(token)
    return [*lines, current.rstrip()]


class MessageError(Exception):
    """A command that cannot do what it was asked: `message` says why (str(): in English)."""

    def __init__(self, message: Message) -> None:
        super().__init__(message.render("en"))
        self.message = message


def render(text: Message | str, lang: str | None = None) -> str:
    """A message in `lang` (default: `language()`); a plain string as it is."""
    return text.render(lang) if isinstance(text, Message) else str(text)


def ids_in(message: Message | str) -> set[str]:
    """The ids of a message and of every message inside it: what it says, as data. A student's
    text is a plain string in it, so no printed or raised text can add an id."""
    found: set[str] = set()
    todo: list[Any] = [message]
    while todo:
        value = todo.pop()
        if isinstance(value, Message):
            found.add(value.id)
            todo += value.params.values()
        elif isinstance(value, list):
            todo += value
    return found


def texts_in(message: Message | str) -> list[str]:
    """The plain strings in a message and every message inside it (a student's error text,
    say), without the kit's words around them."""
    found: list[str] = []
    todo: list[Any] = [message]
    while todo:
        value = todo.pop()
        if isinstance(value, Message):
            todo += value.params.values()
        elif isinstance(value, list):
            todo += value
        elif isinstance(value, str):
            found.append(value)
    return found


def _render_value(value: Any, lang: str) -> Any:
    if isinstance(value, Message):
        return DisplayText(value.render(lang))
    if isinstance(value, list):
        return DisplayText(SEPARATORS[lang].join(str(_render_value(v, lang)) for v in value))
    return DisplayText(value) if isinstance(value, str) else value


def _to_data(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_data()
    if isinstance(value, list):
        return [_to_data(v) for v in value]
    return value if isinstance(value, PLAIN) else str(value)  # a tuple (a shape): its text


def _message_from_data(data: Any, depth: int, text: Callable[[str], str]) -> Message:
    if depth > MAX_DEPTH or not isinstance(data, dict) or set(data) != {"id", "params"}:
        raise ValueError("not a message")
    message_id, params = data["id"], data["params"]
    if type(message_id) is not str or message_id not in TEMPLATES["en"]:
        raise ValueError("not a message")
    if type(params) is not dict or len(params) > MAX_PARAMS or not all(
            type(k) is str for k in params):
        raise ValueError("malformed message parameters")
    return Message(message_id, {k: _from_data(v, depth + 1, text) for k, v in params.items()})


def _from_data(value: Any, depth: int, text: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return _message_from_data(value, depth, text)
    if type(value) is list and len(value) <= MAX_ITEMS:
        return [_from_data(v, depth + 1, text) for v in value]
    if type(value) not in PLAIN:
        raise ValueError("malformed message parameter")
    return text(value) if type(value) is str else value
