"""Chinese templates, by message id (see `messages`). Every id of en.py has one here."""

TEMPLATES: dict[str, str] = {
    "ok": "通过",
    "text": "{text}",
}
