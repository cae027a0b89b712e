"""A question with buttons as an interactive message. Pure.

Up to three choices whose labels fit 20 characters are reply buttons; more (approvals have
four) make a list message: a "Choose" button that opens up to ten rows (titles of 24
characters). A press comes back as an ``interactive`` message with the choice's id and the
question's message id as its context (``inbound``). The question's text is its body (at
most 1,024 characters). WhatsApp cannot take buttons away from a sent message: a closed
question gets its outcome as a reply quoting it, and a late press is the core's to refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.channels import Choice

MAX_BUTTONS, BUTTON_TITLE, BUTTON_ID = 3, 20, 256
MAX_ROWS, ROW_TITLE, ROW_ID, ROW_DESCRIPTION = 10, 24, 200, 72
BODY = 1024
LIST_BUTTON = "Choose"


def _fit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def question_payload(text: str, choices: Sequence[Choice]) -> dict[str, Any]:
    """The ``interactive`` payload asking ``text`` with ``choices``; ``ValueError`` for what
    WhatsApp cannot carry (no choices, over ten, an id too long)."""
    if not choices or len(choices) > MAX_ROWS:
        raise ValueError(f"WhatsApp takes 1 to {MAX_ROWS} choices, not {len(choices)}")
    body = {"text": _fit(text, BODY)}
    if len(choices) <= MAX_BUTTONS and all(len(c.label) <= BUTTON_TITLE for c in choices):
        for choice in choices:
            if not choice.id or len(choice.id) > BUTTON_ID:
                raise ValueError(f"a WhatsApp button id is 1 to {BUTTON_ID} characters: {choice.id!r}")
        buttons = [{"type": "reply", "reply": {"id": c.id, "title": c.label}} for c in choices]
        return {"type": "interactive", "interactive": {"type": "button", "body": body, "action": {"buttons": buttons}}}
    rows = []
    for choice in choices:
        if not choice.id or len(choice.id) > ROW_ID:
            raise ValueError(f"a WhatsApp list row id is 1 to {ROW_ID} characters: {choice.id!r}")
        row = {"id": choice.id, "title": _fit(choice.label, ROW_TITLE)}
        if len(choice.label) > ROW_TITLE:
            row["description"] = _fit(choice.label, ROW_DESCRIPTION)
        rows.append(row)
    return {"type": "interactive", "interactive": {
        "type": "list", "body": body,
        "action": {"button": LIST_BUTTON, "sections": [{"title": _fit("Choices", ROW_TITLE), "rows": rows}]}}}
