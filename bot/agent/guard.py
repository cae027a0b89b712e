"""Input guard: spot prompt-injection attempts in a user's message, and cap its length.

Detection, not proof: six named regexes, tuned so that ordinary
sentences ("I'll ignore the previous email", "you are now able to upload files",
"how do I enable developer mode on my phone?") do not fire. What happens on a hit
depends on the mode: ``off`` does not scan, ``log`` logs at INFO, ``warn`` (default)
at WARNING, ``block`` logs at WARNING and the run answers ``REFUSAL`` instead.

Logs carry the event name ``security.injection_detected``, the pattern names, the
session key and at most a 100-character preview around the first hit, never the
message itself.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)

EVENT = "security.injection_detected"
PREVIEW_CHARS = 100
REFUSAL = "I can't act on that message: it looks like an attempt to change my instructions."


class GuardMode(StrEnum):
    OFF = "off"
    LOG = "log"
    WARN = "warn"
    BLOCK = "block"


_I = re.IGNORECASE
_QUALIFIER = (r"(?:all|any|every|your|previous|prior|above|earlier|preceding|foregoing|"
              r"former|original|initial|system|existing|safety)")
_RULES = (r"(?:instructions?|rules?|prompts?|directives?|guidelines?|commands?|"
          r"programming|constraints?|guardrails?)")
_WORD = r"[\w'’-]+\s+"
_NOT_NEGATED = r"(?<!n't\s)(?<!n’t\s)(?<!not\s)(?<!never\s)"

PATTERNS: dict[str, re.Pattern[str]] = {
    # "ignore all previous instructions", "disregard the rules above", "forget your
    # system prompt"; a qualifier and a rules-like noun are both required.
    "ignore_instructions": re.compile(
        rf"{_NOT_NEGATED}\b(?:ignore|disregard|forget|discard|abandon|bypass)\s+"
        rf"(?:{_WORD}){{0,3}}?{_QUALIFIER}\s+(?:{_WORD}){{0,2}}?{_RULES}\b"
        rf"|{_NOT_NEGATED}\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+"
        r"(?:(?:that\s+)?you(?:'ve|’ve|\s+have|\s+were|\s+was)?\s+(?:been\s+)?told|above|before\b|so\s+far)"
        rf"|{_NOT_NEGATED}\b(?:ignore|disregard|forget|discard)\s+(?:the|all|any|your|these|those)\s+"
        rf"(?:{_WORD})?{_RULES}\s+(?:above|before|so\s+far|you\s+(?:were|have\s+been)\s+given)\b",
        _I,
    ),
    # "you are now DAN", "act as X from now on", "pretend to be X without restrictions"
    "role_override": re.compile(
        r"\byou(?:\s+are|'re|’re)\s+now\s+(?:a|an|the|my|in|no\s+longer|called|named|"
        r"known\s+as|acting|playing|free|unrestricted|unfiltered|uncensored|jailbroken)\b"
        r"|\b(?:act|behave|respond|roleplay)\s+as\s+[^.\n]{1,80}?\bfrom\s+now\s+on\b"
        r"|\bfrom\s+now\s+on,?\s+(?:you\s+(?:are|will\s+(?:be|act)|must\s+act)|act\s+as)\b"
        r"|\bpretend\s+(?:to\s+be|you(?:\s+are|'re|’re))\s+[^.\n]{1,80}?"
        r"(?:without|with\s+no|free\s+(?:of|from))\s+(?:any\s+)?(?:restrictions?|limits?|"
        r"limitations?|filters?|rules|guidelines|censorship|constraints?|ethics)"
        r"|\bdo\s+anything\s+now\b|(?-i:\bDAN\b)\s+mode\b"
        r"|\b(?:you(?:\s+are|'re|’re)(?:\s+now)?|as|be)\s+(?-i:DAN)\b"
        r"|\bjailbr(?:eak|oken)\s+mode\b",
        _I,
    ),
    # fake chat-template or system markers
    "system_tags": re.compile(
        r"<\|(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|>"
        r"|\[\s*/?\s*(?:system|sys|INST)\s*(?:message|prompt)?\s*\]"
        r"|<\s*system\s*(?:prompt|message)?\s*>|<<\s*/?\s*SYS\s*>>"
        r"|^[ \t]*#{2,}\s*(?:system|instruction)s?\s*(?:prompt|message)?\s*:",
        _I | re.MULTILINE,
    ),
    # directives dressed up as configuration
    "instruction_injection": re.compile(
        r"\b(?:new|updated|revised|real|actual|additional)\s+(?:system\s+)?"
        r"(?:instructions?|rules|directives?|prompt)\s*:"
        r"|^[ \t>*#\[-]*(?:(?:system|admin|security|developer)\s+)?override\s*\]?\s*:"
        r"|\bsystem\s+prompt\s*:"
        r"|\bdeveloper\s+mode\s+(?:is\s+)?(?:enabled|activated|on)\b"
        r"(?![^.\n]{0,40}\b(?:phone|android|iphone|ios|device|tablet|browser|chrome|"
        r"firefox|windows|mac|settings|laptop|pc|tv|console)\b)"
        r"|\byou(?:\s+are|'re|’re)\s+(?:now\s+)?(?:in|entering)\s+developer\s+mode\b",
        _I | re.MULTILINE,
    ),
    "null_bytes": re.compile(r"\x00"),
    # pretending the trusted part of the prompt has ended
    "delimiter_escape": re.compile(
        r"\bend\s+of\s+(?:the\s+)?(?:system(?:\s+(?:prompt|message|instructions?)\b|(?![ \t]+\w))"
        r"|instructions\b)"
        r"|<\s*/\s*(?:system|instructions?|system_prompt|prompt)\s*>"
        r"|^[ \t]*[-=#*_~]{3,}\s*end(?:\s+of(?:\s+the)?\s+(?:system(?:\s+prompt)?|prompt|"
        r"instructions|context|input|rules))?\s*[-=#*_~]{3,}[ \t]*$",
        _I | re.MULTILINE,
    ),
}


@dataclass(frozen=True, slots=True)
class InputVerdict:
    text: str  # what the model will read: the message, maybe truncated with a note
    truncated: bool
    original_length: int
    detections: tuple[str, ...]  # names of the patterns that matched, in PATTERNS order
    blocked: bool  # True only in block mode with a detection; answer with REFUSAL


def _first_hits(text: str) -> list[tuple[str, int]]:
    """(pattern name, where it first matches) of every pattern found in ``text``."""
    return [(name, found.start()) for name, pattern in PATTERNS.items() if (found := pattern.search(text))]


def scan(text: str) -> tuple[str, ...]:
    """Names of the injection patterns found in ``text``."""
    return tuple(name for name, _ in _first_hits(text))


def check_input(text: str, *, mode: GuardMode | str = GuardMode.WARN, max_chars: int,
                session_key: str = "") -> InputVerdict:
    """Truncate to ``max_chars`` (telling the model), then scan what the model will read."""
    mode = GuardMode(mode)
    original_length = len(text)
    truncated = original_length > max_chars
    kept = text[:max_chars]
    shown = kept + (f"\n\n[Message truncated: the user sent {original_length:,} characters; "
                    f"only the first {max_chars:,} are shown.]" if truncated else "")
    hits = [] if mode is GuardMode.OFF else _first_hits(kept)
    if not hits:
        return InputVerdict(shown, truncated, original_length, (), False)
    detections = tuple(name for name, _ in hits)
    first = min(at for _, at in hits)
    start = max(0, min(first - 20, len(kept) - PREVIEW_CHARS))
    preview = kept[start:start + PREVIEW_CHARS]
    blocked = mode is GuardMode.BLOCK
    log.log(logging.INFO if mode is GuardMode.LOG else logging.WARNING,
            "%s session=%s patterns=%s mode=%s chars=%d blocked=%s preview=%r",
            EVENT, session_key or "-", ",".join(detections), mode, original_length, blocked, preview,
            extra={"event": EVENT, "patterns": detections, "session_key": session_key})
    return InputVerdict(shown, truncated, original_length, detections, blocked)


def screened(text: str, mode: GuardMode, *, source: str, session_key: str = "", run_id: str = "") -> bool:
    """Text a tool brings from elsewhere (a skill's file, an MCP server's result) through the
    same patterns: a hit is logged as ``check_input`` logs one (``source``, ``key=value`` pairs,
    says where the text came from; never the text); True when it is to be withheld (block mode
    and a hit)."""
    if mode is GuardMode.OFF or not (hits := scan(text)):
        return False
    log.log(logging.INFO if mode is GuardMode.LOG else logging.WARNING,
            "%s session=%s run=%s %s patterns=%s mode=%s", EVENT, session_key or "-", run_id or "-", source,
            ",".join(hits), mode, extra={"event": EVENT, "patterns": hits, "session_key": session_key})
    return mode is GuardMode.BLOCK
