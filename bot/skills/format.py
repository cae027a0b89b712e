"""The Agent Skills format: a folder whose ``SKILL.md`` opens with YAML front matter.

    pdf-forms/
      SKILL.md         ---
                       name: pdf-forms
                       description: Fill in PDF forms. Use when the user sends a form to fill.
                       ---
                       # the body: Markdown instructions the model follows
      scripts/ references/ assets/   optional files the body points to

The front matter, as the open format (agentskills.io) has it: ``name`` (1-64 lowercase
letters, digits and single hyphens inside, the same as the folder's name) and
``description`` (1-1024 characters) are required; ``license``, ``compatibility`` (at most
500 characters), ``metadata`` (a mapping of strings) and ``allowed-tools`` (space-separated
tool names) are optional; other keys are left alone (several products add their own).

Pure: text in, a ``SkillInfo`` out, or a ``SkillFormatError`` saying in one sentence what
is wrong (``chatgate check`` and the start-up warning show it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)


class SkillFormatError(ValueError):
    """A ``SKILL.md`` that is not a skill: the message says why, in words for its author."""


@dataclass(frozen=True, slots=True)
class SkillInfo:
    """What a skill's front matter says of it."""

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    allowed_tools: tuple[str, ...] = ()


def split_front_matter(text: str) -> tuple[str, str]:
    """``(front matter, body)`` of a ``SKILL.md``: the YAML between the opening ``---`` line
    and the next one, and what follows (leading blank lines dropped)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    opening = _FENCE.match(text)
    if opening is None:
        raise SkillFormatError("it does not start with front matter (a line of ---, then name and description)")
    closing = _FENCE.search(text, opening.end())
    if closing is None:
        raise SkillFormatError("its front matter is never closed (no second line of ---)")
    return text[opening.end():closing.start()], text[closing.end():].lstrip("\n")


def parse_skill(text: str, folder: str) -> SkillInfo:
    """The ``SkillInfo`` of a ``SKILL.md`` found in the folder named ``folder``."""
    front, _ = split_front_matter(text)
    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""  # its line 0 ends the opening ---
        problem = getattr(exc, "problem", None) or "cannot be read"
        raise SkillFormatError(f"its front matter is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise SkillFormatError("its front matter is nested too deeply to read") from None
    if not isinstance(data, Mapping):
        raise SkillFormatError("its front matter is not a mapping of keys (name: ..., description: ...)")
    name = _text(data, "name", required=True)
    description = " ".join(_text(data, "description", required=True).split())
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SkillFormatError(f"name {name!r} is not a skill name (1-{MAX_NAME} lowercase letters, digits "
                               "and single hyphens, not at either end)")
    if name != folder:
        raise SkillFormatError(f"name {name!r} is not the name of its folder ({folder!r}); rename one of them")
    if len(description) > MAX_DESCRIPTION:
        raise SkillFormatError(f"description is {len(description)} characters; at most {MAX_DESCRIPTION}")
    compatibility = _text(data, "compatibility")
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY:
        raise SkillFormatError(f"compatibility is {len(compatibility)} characters; at most {MAX_COMPATIBILITY}")
    return SkillInfo(name, description, _text(data, "license"), compatibility, _metadata(data.get("metadata")),
                     _tools(data.get("allowed-tools")))


def skill_body(text: str) -> str:
    """The instructions of a ``SKILL.md``: everything after its front matter."""
    return split_front_matter(text)[1]


def _text(data: Mapping[Any, Any], key: str, *, required: bool = False) -> Any:
    value = data.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise SkillFormatError(f"its front matter has no {key}")
        return None
    if not isinstance(value, str):
        raise SkillFormatError(f"{key} is not text (quote it in the front matter)")
    return value.strip()


def _metadata(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or any(isinstance(v, (Mapping, list)) for v in value.values()):
        raise SkillFormatError("metadata is not a mapping of keys to plain values")
    return tuple((str(k), "" if v is None else str(v)) for k, v in value.items())


def _tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SkillFormatError("allowed-tools is not a space-separated list of tool names")
