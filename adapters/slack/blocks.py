"""The Block Kit the Slack channel posts: mrkdwn as section blocks, the Stop button of a run's
progress message, and a question's buttons (``Asks``). Pure: no SDK, no I/O.

A question is its text as sections and one ``actions`` block (``block_id`` ``ASK_BLOCK``)
with a button per choice, whose ``action_id`` and ``value`` are the choice's id: Slack sends
both back in the ``block_actions`` payload of a press (``inbound.press_of``), and the
channel routes a press by that block id, whatever the choice ids are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.slack.inbound import ASK_BLOCK, STOP_BUTTON
from bot.channels import Choice

SECTION = 3000  # Slack's limit on one section block's text
LABEL = 75  # Slack's limit on a button's text
ACTION_ID = 255  # Slack's limit on an action_id
BUTTONS = 25  # Slack's limit on the elements of one actions block


def sections(text: str) -> list[dict[str, Any]]:
    """mrkdwn as section blocks of at most 3,000 characters, cut at line ends where possible."""
    blocks = []
    while text:
        cut = len(text) if len(text) <= SECTION else (text.rfind("\n", 0, SECTION) + 1 or SECTION)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:cut]}})
        text = text[cut:]
    return blocks


def stop_blocks(text: str, thread: str | None) -> list[dict[str, Any]]:
    button = {"type": "button", "action_id": STOP_BUTTON, "text": {"type": "plain_text", "text": "Stop"},
              "style": "danger", "value": thread or ""}
    return [*sections(text), {"type": "actions", "elements": [button]}]


def question_blocks(text: str, choices: Sequence[Choice]) -> list[dict[str, Any]]:
    """A question's blocks; ``ValueError`` for what Slack would refuse (no choice, more than 25,
    an empty or over-long id, two choices with one id)."""
    ids = [c.id for c in choices]
    if not 1 <= len(ids) <= BUTTONS or len(set(ids)) != len(ids):
        raise ValueError(f"a Slack question takes 1 to {BUTTONS} choices with distinct ids, got {ids}")
    if any(not 1 <= len(i) <= ACTION_ID for i in ids):
        raise ValueError(f"a Slack action_id is 1 to {ACTION_ID} characters, got {ids}")
    buttons = [{"type": "button", "action_id": c.id, "value": c.id,
                "text": {"type": "plain_text", "text": _label(c.label), "emoji": True}} for c in choices]
    return [*sections(text), {"type": "actions", "block_id": ASK_BLOCK, "elements": buttons}]


def _label(label: str) -> str:
    return label if len(label) <= LABEL else label[:LABEL - 1] + "…"
