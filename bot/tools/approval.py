"""Which tool calls need a person's approval, and the words of the question: pure values.

``ApprovalRules.needs(name, is_owner, declared)`` decides. In order:

1. a rule written in ``tools.approval`` (a tool name or glob -> ``ask`` | ``never``; the
   first that matches wins) binds everyone, owners too;
2. a tool's own declaration (an MCP server's ``approval:``) binds everyone too;
3. the defaults, which exempt the platform's owners: ``exec``, ``browser`` and every ``mcp__*`` tool ask
   everyone else, every other tool runs.

A call that needs approval waits only for itself (the registry runs a step's calls
concurrently). The question shows the tool and its arguments shortened, with secrets
masked; its buttons carry ``ap:<approval id>:<decision>``, well within Telegram's 64 bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, Literal

Mode = Literal["ask", "never"]
DEFAULT_ASK: tuple[str, ...] = ("exec", "browser", "mcp__*")  # for everyone but owners
ARGUMENT_CHARS = 300  # of one argument's value on the card
CARD_CHARS = 1200  # of all arguments together


class Decision(StrEnum):
    ONCE = "o"  # allow this call
    SESSION = "s"  # allow this tool for the rest of the session
    ALWAYS = "a"  # allow this exact call for this person from now on
    DENY = "d"


class Outcome(StrEnum):
    """How an approval ended (stored, shown on the card)."""

    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    EXPIRED = "expired"  # the run was stopped or ended, or the bot restarted


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    rules: tuple[tuple[str, Mode], ...] = ()  # tools.approval, in the config's order

    def needs(self, name: str, *, is_owner: bool, declared: Mode | None = None) -> bool:
        for pattern, mode in self.rules:
            if fnmatchcase(name, pattern):
                return mode == "ask"
        if declared is not None:
            return declared == "ask"
        return not is_owner and any(fnmatchcase(name, pattern) for pattern in DEFAULT_ASK)


def choice_id(approval_id: str, decision: Decision) -> str:
    return f"ap:{approval_id}:{decision.value}"


_CHOICE = re.compile(r"^ap:([A-Za-z0-9]{6,32}):([osad])$")


def parse_choice(text: str) -> tuple[str, Decision] | None:
    """(approval id, decision) of a pressed button's id; None for any other text."""
    match = _CHOICE.match(text.strip())
    return (match.group(1), Decision(match.group(2))) if match else None


def call_shape(name: str, arguments: Mapping[str, Any]) -> str:
    """What "Always allow" remembers: the tool and its exact arguments, canonical (a different
    argument asks again: allowing ``exec`` once for ``ls`` never allows ``rm``)."""
    return json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def describe_call(name: str, arguments: Mapping[str, Any], mask: Callable[[str], str]) -> str:
    """The call as the card shows it: each argument on a line, shortened, secrets masked."""
    lines: list[str] = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        text = mask(text)
        if len(text) > ARGUMENT_CHARS:
            text = f"{text[:ARGUMENT_CHARS]}… ({len(text):,} characters)"
        lines.append(f"{key}: {text}")
    body = "\n".join(lines) or "(no arguments)"
    if len(body) > CARD_CHARS:
        body = body[:CARD_CHARS] + "…"
    return body


def question_text(name: str, arguments: Mapping[str, Any], approval_id: str, mask: Callable[[str], str],
                  *, buttons: bool, allow_always: bool, spell: Callable[[str], str], group: bool) -> str:
    """The card's Markdown: the tool, its arguments in a code block, and (without buttons) how to answer."""
    body = describe_call(name, arguments, mask).replace("```", "`\u200b``")
    text = f"**Approval needed** — the assistant wants to run `{name}`:\n```\n{body}\n```"
    if not buttons:
        extra = f", {spell('approve')} {approval_id} always" if allow_always else ""
        text += (f"\nAnswer with {spell('approve')} {approval_id} (once), {spell('approve')} {approval_id} session"
                 f"{' (owners)' if group else ''}{extra}, or {spell('deny')} {approval_id}.")
    return text


def choices_for(approval_id: str, *, allow_always: bool, group: bool) -> Sequence[tuple[str, str, str]]:
    """(id, label, key) of the card's buttons, in order (in a group, only an owner allows for the session)."""
    rows = [(choice_id(approval_id, Decision.ONCE), "Allow once", "y"),
            (choice_id(approval_id, Decision.SESSION), "Session (owners)" if group else "Allow for this session", "s")]
    if allow_always:
        rows.append((choice_id(approval_id, Decision.ALWAYS), "Always allow", "a"))
    rows.append((choice_id(approval_id, Decision.DENY), "Deny", "n"))
    return rows


def outcome_text(name: str, outcome: Outcome, decision: Decision | None, by: str, waited: float) -> str:
    """What the card says once it is closed."""
    after = f" after {waited:.0f} s" if waited >= 1 else ""
    match outcome:
        case Outcome.ALLOWED:
            how = {Decision.SESSION: "allowed for this session", Decision.ALWAYS: "always allowed"}.get(
                decision or Decision.ONCE, "allowed once")
            return f"✅ `{name}` {how} by {by}{after}."
        case Outcome.DENIED:
            return f"❌ `{name}` denied by {by}{after}."
        case Outcome.TIMED_OUT:
            return f"⌛ `{name}` was not approved in time{after}: denied."
        case _:
            return f"⌛ `{name}`: this question expired (the run ended); nothing was run."
