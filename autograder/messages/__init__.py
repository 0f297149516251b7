"""Every sentence a student or instructor reads, by id, with an English and a Chinese template.

Code builds `Message(id, params)`; the text is rendered only when it is shown, in the
language of `MHA_KIT_LANG` (or `mha-kit check --lang`). Templates use `str.format` fields;
a parameter may itself be a `Message` (rendered in the same language), a list of them (joined
with the language's separator), or a plain value (code, numbers, shapes: shown as it is).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from . import en, zh

LANG_VARIABLE = "MHA_KIT_LANG"
LANGUAGES = ("en", "zh")
TEMPLATES: dict[str, dict[str, str]] = {"en": en.TEMPLATES, "zh": zh.TEMPLATES}
SEPARATORS = {"en": "; ", "zh": "；"}
PLAIN = (str, int, float, bool, type(None))


def language() -> str:
    """The language of messages: MHA_KIT_LANG when it names one we have, else English."""
    lang = os.environ.get(LANG_VARIABLE, "en").strip().lower()
    return lang if lang in LANGUAGES else "en"


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
    def from_data(cls, data: Any) -> Message:
        """A message read back from `to_data`; anything malformed raises ValueError."""
        if not isinstance(data, dict) or data.get("id") not in TEMPLATES["en"]:
            raise ValueError("not a message")
        params = data.get("params")
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise ValueError("malformed message parameters")
        return cls(data["id"], {k: _from_data(v) for k, v in params.items()})


def msg(message_id: str, **params: Any) -> Message:
    """A message; an unknown id fails at once, where it is written."""
    if message_id not in TEMPLATES["en"]:
        raise KeyError(f"no message {message_id!r} in messages/en.py")
    return Message(message_id, params)


def render(text: Message | str, lang: str | None = None) -> str:
    """A message in `lang` (default: `language()`); a plain string as it is."""
    return text.render(lang) if isinstance(text, Message) else str(text)


def _render_value(value: Any, lang: str) -> Any:
    if isinstance(value, Message):
        return value.render(lang)
    if isinstance(value, list):
        return SEPARATORS[lang].join(str(_render_value(v, lang)) for v in value)
    return value


def _to_data(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_data()
    if isinstance(value, (list, tuple)):
        return [_to_data(v) for v in value]
    return value if isinstance(value, PLAIN) else str(value)


def _from_data(value: Any) -> Any:
    if isinstance(value, dict):
        return Message.from_data(value)
    if isinstance(value, list):
        return [_from_data(v) for v in value]
    if not isinstance(value, PLAIN):
        raise ValueError("malformed message parameter")
    return value
