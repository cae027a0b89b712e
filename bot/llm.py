"""The conversation as the LLM sees it: messages made of typed parts.

These are the units the store keeps (parts as JSON) and the providers translate into
their own wire formats. A tool call and its result are kept paired by ``tool_call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # results of the previous assistant message's tool calls


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image for vision models, inline as base64."""

    media_type: str
    data: str
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Model reasoning. Anthropic's blocks are passed back verbatim (with signature);
    a redacted block keeps its opaque ``data`` and no text. An OpenAI Responses reasoning
    item keeps its ``item_id`` and ``encrypted`` content (its summary is the text), and
    is passed back only to that API, within its turn."""

    thinking: str
    signature: str | None = None
    redacted_data: str | None = None
    item_id: str | None = None
    encrypted: str | None = None
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; parsed by the tool runner
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


Part: TypeAlias = TextPart | ImagePart | ThinkingPart | ToolCall | ToolResult

_PART_TYPES: dict[str, type] = {
    "text": TextPart,
    "image": ImagePart,
    "thinking": ThinkingPart,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
}


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...] = field(default_factory=tuple)

    @classmethod
    def user(cls, text: str, *extra: Part) -> Message:
        return cls(Role.USER, (TextPart(text), *extra))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(Role.ASSISTANT, (TextPart(text),))

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResult))


def text_size(messages: Iterable[Message]) -> tuple[int, int]:
    """(characters of text, tool calls and results and thinking, number of images) of the
    messages: what cheap token estimates are made from."""
    chars = images = 0
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                chars += len(p.text)
            elif isinstance(p, ToolResult):
                chars += len(p.content)
            elif isinstance(p, ToolCall):
                chars += len(p.name) + len(p.arguments)
            elif isinstance(p, ThinkingPart):
                chars += len(p.thinking)
            elif isinstance(p, ImagePart):
                images += 1
    return chars, images


def parts_to_json(parts: tuple[Part, ...]) -> str:
    return json.dumps([asdict(p) for p in parts], ensure_ascii=False, separators=(",", ":"))


def parts_from_json(raw: str) -> tuple[Part, ...]:
    items: list[dict[str, Any]] = json.loads(raw)
    return tuple(_PART_TYPES[item["type"]](**item) for item in items)
