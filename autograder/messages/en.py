"""English templates, by message id (see `messages`)."""

TEMPLATES: dict[str, str] = {
    "ok": "ok",
    "text": "{text}",  # text that comes from elsewhere as it is: printed output, a file name
}
