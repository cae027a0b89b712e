"""The OpenAI API's shapes, read and written: pure functions, no I/O.

Requests: ``/v1/chat/completions`` (``messages``, ``stream``, ``stream_options.include_usage``)
and ``/v1/responses`` (``input`` as text or items, ``stream``, ``previous_response_id``) are
read into what chatgate runs: the conversation as the client sent it (user and assistant
texts; system and developer messages are the client's and are not used: the bot has its own
prompt) and the session's name when the client gives one (``user``, ``metadata.session``,
or the ``X-Chatgate-Session`` header). Tools are the bot's: a request with ``tools``,
``functions`` or tool messages is refused with a 400 naming the field.

Answers: a chat completion, its chunks (``chat.completion.chunk``, a last one with
``usage`` and no choices when ``include_usage``), a response object and its stream of
events (``response.created`` ... ``response.completed``, each with ``sequence_number``),
and errors in the API's shape (``{"error": {"message", "type", "param", "code"}}``).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

MAX_NAME = 200  # characters of a session's name


@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    retry_after: int | None = None  # seconds, for 429

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True, slots=True)
class Said:
    role: str  # "user" or "assistant"
    text: str


@dataclass(frozen=True, slots=True)
class Request:
    """What a client asked, either endpoint's."""

    model: str
    history: tuple[Said, ...]  # the conversation as sent, the new user message last
    stream: bool = False
    include_usage: bool = False
    name: str | None = None  # the session the client names
    previous_response_id: str | None = None  # /v1/responses

    @property
    def text(self) -> str:
        return self.history[-1].text


def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def _text_of(content: Any, param: str, kinds: tuple[str, ...]) -> str:
    """A message's text: a string, or the text parts of a list (images are refused)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise bad("content must be a string or a list of parts", param)
    texts = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in kinds and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("refusal",):
            continue
        else:
            raise bad(f"only text parts are taken here, not {kind!r}", f"{param}[{n}]", "unsupported_content")
    return "\n".join(texts)


def _refuse_tools(body: dict[str, Any]) -> None:
    for field in ("tools", "functions"):
        if body.get(field):
            raise bad(f"{field}: the assistant runs its own tools; client-side tools are not supported", field,
                      "tools_not_supported")


def _name(body: dict[str, Any], header: str | None) -> str | None:
    metadata = body.get("metadata")
    named = header or (metadata.get("session") if isinstance(metadata, dict) else None) or body.get("user")
    if named is None:
        return None
    if not isinstance(named, str) or not named.strip() or len(named) > MAX_NAME:
        raise bad(f"a session's name is a text of 1 to {MAX_NAME} characters", "user")
    return named.strip()


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model is required (see GET /v1/models; `chatgate` is the assistant)", "model")
    return model


def _new_user_message(history: list[Said], param: str) -> tuple[Said, ...]:
    if not history or history[-1].role != "user" or not history[-1].text.strip():
        raise bad("the last message must be the user's, with text", param)
    return tuple(history)


def chat_request(body: Any, header: str | None = None) -> Request:
    """A ``/v1/chat/completions`` body."""
    if not isinstance(body, dict):
        raise bad("the body must be a JSON object")
    _refuse_tools(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty list", "messages")
    history: list[Said] = []
    for n, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            continue
        if role == "tool" or role == "function" or (role == "assistant" and message.get("tool_calls")):
            raise bad("tool calls are the assistant's own; client-side tool messages are not supported",
                      f"messages[{n}]", "tools_not_supported")
        if role not in ("user", "assistant"):
            raise bad(f"unknown role {role!r}", f"messages[{n}].role")
        history.append(Said(role, _text_of(message.get("content"), f"messages[{n}].content", ("text",))))
    options = body.get("stream_options")
    include = bool(options.get("include_usage")) if isinstance(options, dict) else False
    return Request(_model(body), _new_user_message(history, "messages"), bool(body.get("stream")), include,
                   _name(body, header))


def responses_request(body: Any, header: str | None = None) -> Request:
    """A ``/v1/responses`` body."""
    if not isinstance(body, dict):
        raise bad("the body must be a JSON object")
    _refuse_tools(body)
    given = body.get("input")
    history: list[Said] = []
    if isinstance(given, str):
        history.append(Said("user", given))
    elif isinstance(given, list) and given:
        for n, item in enumerate(given):
            if not isinstance(item, dict):
                raise bad("input items must be objects", f"input[{n}]")
            kind, role = item.get("type", "message"), item.get("role")
            if kind in ("function_call", "function_call_output"):
                raise bad("tool calls are the assistant's own; client-side tool items are not supported",
                          f"input[{n}]", "tools_not_supported")
            if kind != "message" or role in ("system", "developer"):
                continue
            if role not in ("user", "assistant"):
                raise bad(f"unknown role {role!r}", f"input[{n}].role")
            history.append(Said(role, _text_of(item.get("content"), f"input[{n}].content",
                                               ("input_text", "output_text", "text"))))
    else:
        raise bad("input must be a text or a non-empty list of items", "input")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise bad("previous_response_id must be a response's id", "previous_response_id")
    return Request(_model(body), _new_user_message(history, "input"), bool(body.get("stream")), False,
                   _name(body, header), previous)


# -- answers -----------------------------------------------------------------------------


def usage_of(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens}


def completion(cid: str, model: str, created: int, text: str, usage: tuple[int, int],
               finish: str = "stop") -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": finish, "logprobs": None}],
            "usage": usage_of(*usage)}


def chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None, *,
          usage: tuple[int, int] | None = None, include_usage: bool = False) -> str:
    body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
    if include_usage:
        body["usage"] = None
    if usage is not None:
        body["choices"] = []
        body["usage"] = usage_of(*usage)
    return sse(body)


def sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


DONE = "data: [DONE]\n\n"


def response_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}


def response_object(rid: str, model: str, created: int, status: str, output: list[dict[str, Any]],
                    usage: tuple[int, int] | None, previous: str | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output, "output_text": "".join(c["text"] for item in output for c in item.get("content", [])),
            "parallel_tool_calls": False, "tool_choice": "none", "tools": [], "error": None,
            "incomplete_details": None, "previous_response_id": previous,
            "usage": response_usage(*usage) if usage is not None else None}


class ResponseEvents:
    """The events of one streamed response, numbered in order."""

    def __init__(self, rid: str, model: str, created: int, previous: str | None) -> None:
        self.rid, self.model, self.created, self.previous = rid, model, created, previous
        self.item_id = "msg_" + rid.removeprefix("resp_")
        self._seq = itertools.count()

    def _ev(self, kind: str, **data: Any) -> str:
        return sse({"type": kind, "sequence_number": next(self._seq), **data}, kind)

    def start(self) -> str:
        begun = response_object(self.rid, self.model, self.created, "in_progress", [], None, self.previous)
        at = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        return (self._ev("response.created", response=begun) + self._ev("response.in_progress", response=begun)
                + self._ev("response.output_item.added", output_index=0,
                           item=message_item(self.item_id, "", "in_progress"))
                + self._ev("response.content_part.added", **at,
                           part={"type": "output_text", "text": "", "annotations": []}))

    def delta(self, text: str) -> str:
        return self._ev("response.output_text.delta", item_id=self.item_id, output_index=0, content_index=0,
                        delta=text, logprobs=[])

    def end(self, text: str, usage: tuple[int, int], status: str = "completed") -> str:
        at = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        item = message_item(self.item_id, text)
        done = response_object(self.rid, self.model, self.created, status, [item], usage, self.previous)
        return (self._ev("response.output_text.done", **at, text=text, logprobs=[])
                + self._ev("response.content_part.done", **at, part=item["content"][0])
                + self._ev("response.output_item.done", output_index=0, item=item)
                + self._ev(f"response.{status}", response=done))

    def failed(self, message: str) -> str:
        body = response_object(self.rid, self.model, self.created, "failed", [], None, self.previous)
        body["error"] = {"code": "server_error", "message": message}
        return self._ev("response.failed", response=body)
