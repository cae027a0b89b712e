"""OpenAI Chat Completions, and any compatible server (vLLM, Ollama, ...) via ``base_url``.

The request is posted as the wire-format JSON it already is and the chunks are read as the
plain dicts the server sent (``bot.providers.wire``): the SDK would walk the body again and make
a pydantic model of every chunk (about 8 ms of CPU per request with a 40-message history).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from bot.errors import ContextTooLongError, ProviderError
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
from bot.providers.failures import TransientError, error_fields, looks_like_context_overflow, scrub
from bot.providers.pricing import bare_name
from bot.providers.streaming import Assembler, StreamingProvider
from bot.providers.wire import StreamError, Wire, WireError

log = logging.getLogger(__name__)

_STOP_REASONS = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}


# ----------------------------------------------------------------------------- request


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}


def _user_content(parts: Sequence[TextPart | ImagePart]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_url(p) for p in parts]


def to_openai_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our conversation in Chat Completions form. Thinking parts are dropped: Chat
    Completions has no way to pass reasoning back."""
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role is Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                entry["content"] = message.text or None
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in message.tool_calls
                ]
            wire.append(entry)
            continue
        wire += user_side(message, lambda r: {"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content},
                          _user_content)
    return wire


def user_side(message: Message, result: Callable[[ToolResult], dict[str, Any]],
              content: Callable[[Sequence[TextPart | ImagePart]], object]) -> list[dict[str, Any]]:
    """A user or tool message in either OpenAI API: one item per tool result, then its text
    and images as a user turn (an empty one when a user message has nothing else); text alone
    as a plain string, the most compatible form for local servers."""
    items = [result(r) for r in message.tool_results]
    rest = [p for p in message.parts if isinstance(p, (TextPart, ImagePart))]
    if rest or (message.role is Role.USER and not message.tool_results):
        text = [p.text for p in rest if isinstance(p, TextPart)]
        items.append({"role": "user", "content": "".join(text) if len(text) == len(rest) else content(rest)})
    return items


_FIXED_TEMPERATURE = ("o1", "o3", "o4", "gpt-5")  # reasoning models: the API refuses a temperature


def fixed_temperature(model: str) -> bool:
    """OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 but not gpt-5-chat) take no temperature."""
    name = bare_name(model)
    return name.startswith(_FIXED_TEMPERATURE) and "chat" not in name


OPENAI_API = "https://api.openai.com/v1"


def _is_openai_host(base_url: str | None) -> bool:
    host = urlsplit(base_url).hostname if base_url else "api.openai.com"
    return host is not None and (host == "openai.com" or host.endswith(".openai.com"))


# ----------------------------------------------------------------------------- response


class _Assembler:
    """Turns chat.completion.chunk objects (parsed JSON dicts) into our events and the final message."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[dict[str, Any]] = []  # by our index: id, name, arguments
        self._slots: dict[int, int] = {}  # wire index -> our index
        self.finish_reason: str | None = None
        self.usage = Usage()

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        model = chunk.get("model")
        if model and isinstance(model, str):
            self.model = model
        usage = chunk.get("usage")
        if usage is not None:
            details = usage.get("prompt_tokens_details") or {}
            self.usage = Usage(
                input_tokens=usage.get("prompt_tokens") or 0,  # includes cached tokens, as Usage wants
                output_tokens=usage.get("completion_tokens") or 0,
                cache_read_tokens=details.get("cached_tokens") or 0,
                cache_write_tokens=details.get("cache_write_tokens") or 0,
            )
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")  # vLLM, Ollama, DeepSeek
            if isinstance(reasoning, str) and reasoning:
                self.thinking.append(reasoning)
                events.append(ThinkingDelta(reasoning))
            content = delta.get("content")
            if content:
                if not isinstance(content, str):
                    raise TypeError(f"delta content is {type(content).__name__}, not a string")
                self.text.append(content)
                events.append(TextDelta(content))
            for position, call in enumerate(delta.get("tool_calls") or ()):
                events.append(self._tool_delta(position, call))
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                self.finish_reason = str(finish_reason)
        return events

    def _tool_delta(self, position: int, call: dict[str, Any]) -> ToolCallDelta:
        index = call.get("index")
        wire_index = index if isinstance(index, int) else position
        call_id = call.get("id")
        slot = self._slots.get(wire_index)
        # Some servers number every call 0; a new id on a used index is a new call.
        if slot is None or (call_id and self.calls[slot]["id"] and call_id != self.calls[slot]["id"]):
            slot = len(self.calls)
            self._slots[wire_index] = slot
            self.calls.append({"id": "", "name": "", "arguments": ""})
        entry = self.calls[slot]
        fn = call.get("function") or {}
        name: str | None = fn.get("name") or None
        arguments = fn.get("arguments") or ""
        is_new_id = bool(call_id) and not entry["id"]
        if is_new_id:
            entry["id"] = call_id
        if name and not entry["name"]:
            entry["name"] = name
        entry["arguments"] += arguments
        return ToolCallDelta(index=slot, id=call_id if is_new_id else None, name=name, arguments=arguments)

    def finish(self, provider: str) -> Completed:
        if self.finish_reason is None:
            raise TransientError("stream ended early", provider=provider,
                                 detail="the stream closed before a finish_reason")
        parts: list[Part] = []
        if self.thinking:
            parts.append(ThinkingPart("".join(self.thinking)))
        if self.text:
            parts.append(TextPart("".join(self.text)))
        parts.extend(ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in self.calls)
        stop = _STOP_REASONS.get(self.finish_reason, StopReason.UNKNOWN)
        if self.calls and stop is StopReason.END_TURN:  # e.g. Ollama says "stop" with tool calls
            stop = StopReason.TOOL_USE
        return Completed(Message(Role.ASSISTANT, tuple(parts)), stop, self.usage, self.model)


# ----------------------------------------------------------------------------- provider


class OpenAIProvider(StreamingProvider):
    """Streams Chat Completions; our retry policy, typed errors, cancellable."""

    name = "openai"
    path = "/chat/completions"

    def _make_client(self, api_key: str, base_url: str | None, timeout: float) -> Wire:
        # api.openai.com wants max_completion_tokens (its reasoning models refuse max_tokens);
        # vLLM, Ollama, llama.cpp and most proxies know max_tokens best, so they get that.
        self._tokens_param = "max_completion_tokens" if _is_openai_host(base_url) else "max_tokens"
        return Wire(base_url or OPENAI_API, {"Authorization": f"Bearer {api_key or 'unused'}"}, timeout)

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            # the system prompt and history first and byte-stable; the volatile part last
            "messages": to_openai_messages(request.system, with_volatile(request.messages, request.volatile)),
            "stream": True,
            "stream_options": {"include_usage": True},
            self._tokens_param: request.max_tokens,
        }
        if request.tools:
            params["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                 "parameters": t.parameters}} for t in request.tools]
        if request.temperature is not None and not fixed_temperature(request.model):
            params["temperature"] = request.temperature
        if request.reasoning_effort is not None:
            params["reasoning_effort"] = request.reasoning_effort
        return params

    def _assembler(self, model: str) -> Assembler:
        return _Assembler(model)

    def _failure(self, err: WireError) -> TransientError | ProviderError:
        if isinstance(err, StreamError):  # an error object inside the stream
            message, code = error_fields(err.body, str(err))
            message = scrub(message, self._secret)
            if looks_like_context_overflow(code, message):
                return ContextTooLongError(f"{self.name}: {message}", provider=self.name)
            return TransientError("error in stream", provider=self.name, detail=message)
        return super()._failure(err)

