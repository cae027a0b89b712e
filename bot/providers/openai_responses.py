"""OpenAI's Responses API (a named model's ``api: responses``).

The client, retry policy, cancellation and error mapping are Chat Completions' own
(``bot.providers.openai``, no SDK either); the request has the Responses shape:
``instructions``, a list of ``input`` items, ``max_output_tokens``, ``reasoning.effort``.

The API is used stateless (``store: false``): the conversation goes with every request. A
reasoning model's reasoning items come back with their ``encrypted_content`` (asked for with
``include``, which only reasoning models accept) and are passed back as they came in the
next requests of the same turn, where the API wants them between a function call and its
output; reasoning of earlier turns, and any other vendor's thinking, is left out.

The stream's output items (reasoning, message, function call) arrive as deltas, then each
as a whole in ``response.output_item.done``, which wins; the response ends with
``response.completed``, ``.incomplete`` or ``.failed``. An ``error`` event is raised by the
wire when it nests ``{"error": {...}}`` (what the API sends) and read here when it is flat
(what the API reference shows).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from bot.errors import ProviderError
from bot.llm import ImagePart, Message, Part, Role, TextPart, ThinkingPart, ToolCall
from bot.providers.base import (
    ChatRequest,
    Completed,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    Usage,
    newest_user_turn,
    with_volatile,
)
from bot.providers.failures import TransientError, classify_status, error_fields, scrub
from bot.providers.openai import OpenAIProvider, fixed_temperature, user_side
from bot.providers.streaming import Assembler, string_field
from bot.providers.wire import StreamError, WireError

log = logging.getLogger(__name__)

ENCRYPTED_REASONING = "reasoning.encrypted_content"
_INCOMPLETE = {"max_output_tokens": StopReason.MAX_TOKENS, "content_filter": StopReason.CONTENT_FILTER}
# error codes of a failed response (or an error event) that another attempt may fix
_TRANSIENT_CODES = {"rate_limit_exceeded": 429, "too_many_requests": 429, "server_error": 500,
                    "vector_store_timeout": 504}


# ----------------------------------------------------------------------------- request


def _user_content(parts: Sequence[TextPart | ImagePart]) -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": p.text} if isinstance(p, TextPart)
            else {"type": "input_image", "image_url": f"data:{p.media_type};base64,{p.data}", "detail": "auto"}
            for p in parts]


def _reasoning_item(part: ThinkingPart) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": part.thinking}] if part.thinking else []
    return {"type": "reasoning", "id": part.item_id, "summary": summary, "encrypted_content": part.encrypted}


def to_responses_input(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our conversation as Responses input items. Reasoning items go back only after the
    newest user turn (this turn's) and only with their encrypted content: with ``store:
    false`` the API cannot look an item up by its id."""
    turn = newest_user_turn(messages)
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            for part in message.parts:
                if isinstance(part, ThinkingPart):
                    if turn is not None and index > turn and part.item_id and part.encrypted:
                        items.append(_reasoning_item(part))
                elif isinstance(part, TextPart) and part.text:
                    items.append({"role": "assistant", "content": part.text})
                elif isinstance(part, ToolCall):
                    items.append({"type": "function_call", "call_id": part.id, "name": part.name,
                                  "arguments": part.arguments})
            continue
        items += user_side(message, lambda r: {"type": "function_call_output", "call_id": r.tool_call_id,
                                               "output": r.content}, _user_content)
    return items


def reasons(request: ChatRequest) -> bool:
    """A reasoning model (o-series, gpt-5) or an effort set: only those accept ``include``
    of encrypted reasoning ("Encrypted content is not supported with this model")."""
    return request.reasoning_effort is not None or fixed_temperature(request.model)


def request_params(request: ChatRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": request.model,
        "input": to_responses_input(with_volatile(request.messages, request.volatile)),
        "stream": True,
        "store": False,
        "max_output_tokens": request.max_tokens,
    }
    if request.system:
        params["instructions"] = request.system
    if request.tools:
        params["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                            "parameters": t.parameters, "strict": False} for t in request.tools]
    if request.reasoning_effort is not None:
        params["reasoning"] = {"effort": request.reasoning_effort}
    if reasons(request):
        params["include"] = [ENCRYPTED_REASONING]
    if request.temperature is not None and not fixed_temperature(request.model):
        params["temperature"] = request.temperature
    return params


# ----------------------------------------------------------------------------- response


def stream_failure(provider: str, code: str | None, message: object,
                   secret: str | None) -> TransientError | ProviderError:
    """A failed response (``response.failed``) or an error event, by its code, its message scrubbed;
    a code that is not transient is a refused request (400: context overflow or request)."""
    return classify_status(_TRANSIENT_CODES.get(code or "", 400), scrub(str(message), secret),
                           provider=provider, code=code)


class _Assembler:
    """Turns Responses stream events (parsed JSON dicts) into our events and the final message."""

    def __init__(self, model: str, provider: str, secret: str | None) -> None:
        self.model = model
        self.provider, self.secret = provider, secret
        self.items: dict[int, dict[str, Any]] = {}  # output_index -> the item as it streams, in order
        self.calls = 0
        self.status: str | None = None  # completed | incomplete, once the response ended
        self.incomplete: str | None = None
        self.refused = False
        self.usage = Usage()

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "response.output_text.delta":  # the common case first
            return self._text(event)
        if kind == "response.function_call_arguments.delta":
            state = self._item(event)
            delta = string_field(event, "delta")
            state["arguments"].append(delta)
            return [ToolCallDelta(state["slot"], None, None, delta)] if delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = string_field(event, "delta")
            self._item(event)["thinking"].append(delta)
            return [ThinkingDelta(delta)] if delta else []
        if kind == "response.refusal.delta":
            self.refused = True
            return self._text(event)
        if kind == "response.output_item.added":
            return self._added(event["output_index"], event["item"])
        if kind == "response.output_item.done":
            self._added(event["output_index"], event["item"])
            self.items[event["output_index"]]["done"] = event["item"]
        elif kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
            self._response(event["response"])
            if kind in ("response.completed", "response.incomplete"):
                self.status = event["response"].get("status") or kind.rpartition(".")[2]
        elif kind == "response.failed":
            error = event["response"].get("error") or {}
            raise stream_failure(self.provider, error.get("code"), error.get("message") or "failed", self.secret)
        elif kind == "error":  # the flat shape of the API reference (the wire raises the nested one)
            raise stream_failure(self.provider, event.get("code"), event.get("message") or "error", self.secret)
        return []

    def _text(self, event: dict[str, Any]) -> list[StreamEvent]:
        delta = string_field(event, "delta")
        self._item(event)["text"].append(delta)
        return [TextDelta(delta)] if delta else []

    def _item(self, event: dict[str, Any]) -> dict[str, Any]:
        state = self.items.get(event["output_index"])
        if state is None:
            raise ValueError(f"{event.get('type')} for an output item that was never added")
        return state

    def _added(self, index: int, item: dict[str, Any]) -> list[StreamEvent]:
        if index in self.items:
            return []
        kind = item["type"]
        state: dict[str, Any] = {"kind": kind, "text": [], "thinking": [], "arguments": [], "done": None}
        self.items[index] = state
        if kind != "function_call":
            return []
        state["slot"] = self.calls
        self.calls += 1
        arguments = item.get("arguments") or ""
        state["arguments"].append(arguments)
        return [ToolCallDelta(state["slot"], item["call_id"], item["name"], arguments)]

    def _response(self, response: dict[str, Any]) -> None:
        model = response.get("model")
        if model and isinstance(model, str):
            self.model = model
        details = response.get("incomplete_details") or {}
        self.incomplete = details.get("reason") or self.incomplete
        usage = response.get("usage")
        if usage:
            cached = usage.get("input_tokens_details") or {}
            self.usage = Usage(usage.get("input_tokens") or 0, usage.get("output_tokens") or 0,
                               cached.get("cached_tokens") or 0, cached.get("cache_write_tokens") or 0)

    def finish(self, provider: str) -> Completed:
        if self.status is None:
            raise TransientError("stream ended early", provider=provider,
                                 detail="the stream closed before response.completed")
        parts: list[Part] = []
        for index in sorted(self.items):
            part = _part(self.items[index])
            if part is not None:
                parts.append(part)
        message = Message(Role.ASSISTANT, tuple(parts))
        if self.incomplete is not None:
            stop = _INCOMPLETE.get(self.incomplete, StopReason.UNKNOWN)
        elif message.tool_calls:
            stop = StopReason.TOOL_USE
        else:
            stop = StopReason.REFUSAL if self.refused else StopReason.END_TURN
        return Completed(message, stop, self.usage, self.model)


def _part(state: dict[str, Any]) -> Part | None:
    """One finished output item as our part; the ``done`` item wins over the deltas."""
    done = state["done"] or {}
    kind = state["kind"]
    if kind == "reasoning":
        summary = [s.get("text") or "" for s in done.get("summary") or ()]
        text = "\n\n".join(s for s in summary if s) or "".join(state["thinking"])
        return ThinkingPart(text, item_id=done.get("id"), encrypted=done.get("encrypted_content"))
    if kind == "message":
        content = done.get("content")
        if content:
            text = "".join(c.get("text") or c.get("refusal") or "" for c in content)
        else:
            text = "".join(state["text"])
        return TextPart(text) if text else None
    if kind == "function_call":
        call_id, name = done.get("call_id"), done.get("name")
        arguments = done.get("arguments")
        return ToolCall(id=str(call_id), name=str(name),
                        arguments=arguments if isinstance(arguments, str) else "".join(state["arguments"]))
    log.debug("openai-responses: ignoring a %s output item", kind)
    return None


# ----------------------------------------------------------------------------- provider


class ResponsesProvider(OpenAIProvider):
    """Streams the Responses API; the chat provider's client, retries and errors."""

    name = "openai-responses"
    path = "/responses"

    _params = staticmethod(request_params)

    def _assembler(self, model: str) -> Assembler:
        return _Assembler(model, self.name, self._secret)

    def _failure(self, err: WireError) -> TransientError | ProviderError:
        if isinstance(err, StreamError):
            message, code = error_fields(err.body, str(err))  # an error event inside the stream
            return stream_failure(self.name, code, message, self._secret)
        return super()._failure(err)
