"""Anthropic Messages API, streamed as raw events; thinking blocks passed back verbatim.

Like the OpenAI providers, no SDK: the body is posted as the wire-format JSON it already is
and each event read as the plain dict the server sent (``bot.providers.wire``, which raises an
``error`` event); a ``ping`` is an event of no kind the assembler reads.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from bot.errors import ProviderError
from bot.llm import ImagePart, Message, Part, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.providers.base import (
    ChatRequest,
    Completed,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    Usage,
    with_volatile,
)
from bot.providers.failures import TransientError, classify_status, error_fields, scrub
from bot.providers.streaming import StreamingProvider, string_field
from bot.providers.wire import StreamError, Wire, WireError

log = logging.getLogger(__name__)

_STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
}
# error.type of an error event inside a 200 stream -> the status it stands for
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}
# a named model's reasoning_effort as an extended-thinking budget (tokens; the API refuses under 1024);
# none/minimal: off
_EFFORT_BUDGET = {"low": 1024, "medium": 4096, "high": 16_384, "xhigh": 32_768}
ANTHROPIC_API = "https://api.anthropic.com"
API_VERSION = "2026-10-21"  # the anthropic-version header every request carries (the official SDK's 2.x)


# ----------------------------------------------------------------------------- request


def _tool_input(arguments: str) -> dict[str, Any]:
    """The model's raw argument text as the API wants it back: an object, {} if unreadable."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature is None:  # not Anthropic's (or lost its signature): the API would refuse it
        return None
    return {"type": "thinking", "thinking": part.thinking, "signature": part.signature}


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None  # empty text is refused
    if isinstance(part, ImagePart):
        return {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": _tool_input(part.arguments)}
    if isinstance(part, ToolResult):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id, "is_error": part.is_error}
        if part.content:
            block["content"] = part.content
        return block
    return None


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our conversation as Messages API turns. Thinking goes first in an assistant turn,
    tool results first in a user turn; consecutive user turns are merged."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.ASSISTANT:
            role = "assistant"
            thinking = [_thinking_block(p) for p in message.parts if isinstance(p, ThinkingPart)]
            rest = [_block(p) for p in message.parts if isinstance(p, (TextPart, ToolCall))]
            blocks = [b for b in (*thinking, *rest) if b is not None]
        else:
            role = "user"
            results = [_block(p) for p in message.tool_results]
            rest = [_block(p) for p in message.parts if isinstance(p, (TextPart, ImagePart))]
            blocks = [b for b in (*results, *rest) if b is not None]
        if not blocks:
            log.debug("anthropic: skipping a %s message with no content", role)
            continue
        if role == "user" and wire and wire[-1]["role"] == "user":
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


_EPHEMERAL = {"type": "ephemeral"}
_UNCACHEABLE = ("thinking", "redacted_thinking")  # the API refuses cache_control on these


def _mark(message: dict[str, Any]) -> None:
    """Put a cache breakpoint on the message's last block that can carry one."""
    for block in reversed(message["content"]):
        if block["type"] not in _UNCACHEABLE:
            block["cache_control"] = dict(_EPHEMERAL)
            return


def add_cache_breakpoints(wire: list[dict[str, Any]]) -> None:
    """Breakpoints on the stable history prefix (the message before the newest user turn,
    read again next turn) and on the last message when the turn goes on with tool results
    (read again at the next iteration). With the system prompt's, three of the four allowed."""
    newest = next((i for i in range(len(wire) - 1, -1, -1) if wire[i]["role"] == "user"
                   and any(b["type"] != "tool_result" for b in wire[i]["content"])), None)
    if newest is None:
        return
    if newest > 0:
        _mark(wire[newest - 1])
    if len(wire) - 1 > newest:
        _mark(wire[-1])


def request_params(request: ChatRequest) -> dict[str, Any]:
    messages = to_anthropic_messages(with_volatile(request.messages, request.volatile))
    add_cache_breakpoints(messages)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": True,
    }
    if request.system:  # tools and system prompt, cached together (tools come first)
        params["system"] = [{"type": "text", "text": request.system, "cache_control": dict(_EPHEMERAL)}]
    if request.tools:
        params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                           for t in request.tools]
    budget = _EFFORT_BUDGET.get(request.reasoning_effort or "")
    if budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.max_tokens <= budget:  # the API needs room for the answer after thinking
            params["max_tokens"] = budget + request.max_tokens
        # temperature is left out: the API refuses it together with thinking
    elif request.temperature is not None:
        params["temperature"] = request.temperature
    return params


# ----------------------------------------------------------------------------- response


class _Assembler:
    """Turns raw message stream events (parsed JSON dicts) into our events and the final message."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.blocks: dict[int, dict[str, Any]] = {}  # wire index -> block state, in arrival order
        self.tool_count = 0
        self.tokens = {"input_tokens": 0, "output_tokens": 0,
                       "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "content_block_delta":  # the common case first
            return self._delta(self.blocks.get(event["index"]), event["delta"])
        if kind == "content_block_start":
            return self._start(event["index"], event["content_block"])
        if kind == "message_start":
            message = event["message"]
            model = message.get("model")
            if model and isinstance(model, str):
                self.model = model
            self._count(message.get("usage"))
        elif kind == "message_delta":
            self.stop_reason = event["delta"].get("stop_reason") or self.stop_reason
            self._count(event.get("usage"))  # cumulative figures: they replace message_start's
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _count(self, usage: dict[str, Any] | None) -> None:
        if usage is None:
            return
        for key in self.tokens:
            value = usage.get(key)
            if isinstance(value, int):
                self.tokens[key] = value

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        kind = block["type"]
        if kind == "text":
            text = block.get("text") or ""
            self.blocks[index] = {"kind": "text", "text": [text]}
            return [TextDelta(text)] if text else []
        if kind == "thinking":
            thinking = block.get("thinking") or ""
            self.blocks[index] = {"kind": "thinking", "text": [thinking], "signature": [block.get("signature") or ""]}
            return [ThinkingDelta(thinking)] if thinking else []
        if kind == "redacted_thinking":
            self.blocks[index] = {"kind": "redacted", "data": block["data"]}
            return []
        if kind == "tool_use":
            slot = self.tool_count
            self.tool_count += 1
            self.blocks[index] = {"kind": "tool", "slot": slot, "id": block["id"], "name": block["name"],
                                  "json": [], "input": block.get("input") or {}}
            return [ToolCallDelta(index=slot, id=block["id"], name=block["name"], arguments="")]
        log.debug("anthropic: ignoring a %s content block", kind)
        return []

    def _delta(self, state: dict[str, Any] | None, delta: dict[str, Any]) -> list[StreamEvent]:
        kind = delta["type"]
        if state is None:
            raise ValueError(f"{kind} for a content block that never started")
        if kind == "text_delta" and state["kind"] == "text":
            text = string_field(delta, "text")
            state["text"].append(text)
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta" and state["kind"] == "thinking":
            thinking = string_field(delta, "thinking")
            state["text"].append(thinking)
            return [ThinkingDelta(thinking)] if thinking else []
        if kind == "signature_delta" and state["kind"] == "thinking":
            state["signature"].append(string_field(delta, "signature"))
        elif kind == "input_json_delta" and state["kind"] == "tool":
            partial = string_field(delta, "partial_json")
            state["json"].append(partial)
            if partial:
                return [ToolCallDelta(index=state["slot"], id=None, name=None, arguments=partial)]
        return []

    def finish(self, provider: str) -> Completed:
        if not self.stopped:
            raise TransientError("stream ended early", provider=provider,
                                 detail="the stream closed before message_stop")
        parts: list[Part] = []
        for state in self.blocks.values():
            if state["kind"] == "thinking":
                parts.append(ThinkingPart("".join(state["text"]), signature="".join(state["signature"]) or None))
            elif state["kind"] == "redacted":
                parts.append(ThinkingPart("", redacted_data=state["data"]))
            elif state["kind"] == "text" and "".join(state["text"]):
                parts.append(TextPart("".join(state["text"])))
            elif state["kind"] == "tool":
                arguments = "".join(state["json"]) or json.dumps(state["input"])
                parts.append(ToolCall(id=state["id"], name=state["name"], arguments=arguments))
        t = self.tokens
        usage = Usage(
            # Anthropic's input_tokens leaves out cached tokens; Usage counts the whole prompt.
            input_tokens=t["input_tokens"] + t["cache_read_input_tokens"] + t["cache_creation_input_tokens"],
            output_tokens=t["output_tokens"],
            cache_read_tokens=t["cache_read_input_tokens"],
            cache_write_tokens=t["cache_creation_input_tokens"],
        )
        stop = _STOP_REASONS.get(self.stop_reason or "", StopReason.UNKNOWN)
        return Completed(Message(Role.ASSISTANT, tuple(parts)), stop, usage, self.model)


# ----------------------------------------------------------------------------- provider


class AnthropicProvider(StreamingProvider):
    """Streams the Messages API; our retry policy, typed errors, cancellable."""

    name = "anthropic"
    path = "/v1/messages"
    error_key = "type"

    def _make_client(self, api_key: str, base_url: str | None, timeout: float) -> Wire:
        # the key as the official SDK sends it now (a bearer token), with its API version
        return Wire(base_url or ANTHROPIC_API, {"Authorization": f"Bearer {api_key}", "anthropic-version": API_VERSION},
                    timeout)

    _params = staticmethod(request_params)

    def _assembler(self, model: str) -> _Assembler:
        return _Assembler(model)

    def _failure(self, err: WireError) -> TransientError | ProviderError:
        if isinstance(err, StreamError):  # an error event inside a 200 stream: its type says what it is
            message, kind = error_fields(err.body, str(err), self.error_key)
            return classify_status(_ERROR_TYPE_STATUS.get(str(kind), 500), scrub(message, self._secret),
                                   provider=self.name, code=kind)
        return super()._failure(err)

