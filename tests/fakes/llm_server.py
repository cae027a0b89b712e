"""A fake LLM server on 127.0.0.1 speaking OpenAI ``/v1/chat/completions`` and ``/v1/responses``
(``tests.fakes.llm_responses``) and Anthropic ``/v1/messages``, streamed (SSE, the real event shapes) or not, so the real SDKs run in tests.

    async with FakeLLM() as llm:
        llm.script(Reply.text("hi"), Reply.error(429, retry_after=1))
        ... OpenAI SDK at llm.openai_base_url, Anthropic SDK at llm.anthropic_base_url ...
        llm.requests[0].body; await llm.requests[0].disconnected.wait()

A ``Reply`` is dialect-neutral: the endpoint that receives it renders it. With an empty
script the answer is ``"echo: " + last user text``. Standalone, for benchmarks and manual
checks: ``python -m tests.fakes.llm_server --port 0`` prints the base URL and echoes
(``--help``: a streamed default answer, and replies scripted over stdin for benchmarks).

chatgate titles a session after its first exchange, in the background (``bot.models.titles``):
such a request (its system prompt starts with ``TITLE_MARKER``) is answered "A fake title"
on the side, never from the script and never in ``requests``, so a test's script and request
count stay its runs'. ``title_requests`` holds them; ``FakeLLM(titles="script")``
serves them like any request (a test of titles scripts their answers).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import json
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from tests.fakes import llm_responses
from tests.fakes.serving import serve

Dialect = Literal["openai", "anthropic", "responses"]
TITLE_MARKER = "You name conversations."  # how bot.models.titles.TITLE_SYSTEM begins
FAKE_TITLE = "A fake title"
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Tokens:
    """Usage to report. ``input`` is the whole prompt, cached parts included."""

    input: int = 12
    output: int = 5
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)  # a str is sent verbatim
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True, slots=True)
class Thought:
    text: str = ""
    signature: str = ""
    redacted_data: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Stops are neutral names: end_turn, tool_use, max_tokens,
    stop_sequence, content_filter, refusal."""

    kind: Literal["message", "error", "hang", "malformed", "failed"] = "message"
    content: str = ""  # the answer's text
    thoughts: tuple[Thought, ...] = ()
    calls: tuple[Call, ...] = ()
    stop: str | None = None
    usage: Tokens | None = None
    chunk_size: int = 4  # characters of text / arguments per streamed chunk
    delay: float = 0.0  # seconds before each streamed chunk
    cut_after: int | None = None  # drop the TCP connection after this many content chunks
    error_after: int | None = None  # send an in-stream error event after this many chunks
    status: int = 200
    code: str | None = None
    message: str | None = None
    retry_after: float | str | None = None
    retry_after_ms: float | None = None

    @classmethod
    def text(cls, text: str, **kw: Any) -> Reply:
        return cls(content=text, **kw)

    @classmethod
    def tool_calls(cls, calls: list[Call] | tuple[Call, ...], *, text: str = "", **kw: Any) -> Reply:
        return cls(content=text, calls=tuple(calls), **kw)

    @classmethod
    def thinking(cls, thinking: str = "", *, signature: str = "sig-fake", text: str = "",
                 redacted_data: str | None = None, calls: tuple[Call, ...] = (), **kw: Any) -> Reply:
        thoughts = [Thought(thinking, signature)] if thinking else []
        if redacted_data is not None:
            thoughts.append(Thought(redacted_data=redacted_data))
        return cls(content=text, thoughts=tuple(thoughts), calls=tuple(calls), **kw)

    @classmethod
    def error(cls, status: int, code: str | None = None, *, message: str | None = None,
              retry_after: float | str | None = None, retry_after_ms: float | None = None) -> Reply:
        return cls(kind="error", status=status, code=code, message=message, retry_after=retry_after,
                   retry_after_ms=retry_after_ms)

    @classmethod
    def failed(cls, code: str, *, message: str = "The response failed.") -> Reply:
        """The Responses API's ``response.failed`` event (with ``error.code``) after the stream began."""
        return cls(kind="failed", code=code, message=message)

    @classmethod
    def hang(cls) -> Reply:
        """Never answer (until the client goes away or the server stops)."""
        return cls(kind="hang")

    @classmethod
    def malformed(cls) -> Reply:
        """200 with a body that is not valid JSON / SSE data."""
        return cls(kind="malformed")


@dataclass(frozen=True, slots=True)
class Received:
    """One request the server got, and what happened to it."""

    index: int
    path: str
    headers: dict[str, str]
    body: Any
    reply: Reply
    disconnected: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # client left early
    finished: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # response fully sent
    started: float = field(default_factory=time.monotonic)  # when it arrived
    ended: list[float] = field(default_factory=list, repr=False)  # when it was answered or left (once)

    @property
    def dialect(self) -> Dialect:
        if self.path.endswith("/messages"):
            return "anthropic"
        return "responses" if self.path.endswith("/responses") else "openai"


# ----------------------------------------------------------------------------- dialects

_STOPS: dict[Dialect, dict[str, str]] = {
    "openai": {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop",
               "content_filter": "content_filter", "refusal": "content_filter"},
    "anthropic": {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
                  "stop_sequence": "stop_sequence", "content_filter": "refusal", "refusal": "refusal"},
    "responses": llm_responses.STOPS,
}
# status -> (openai type, openai code, anthropic type, message)
_ERRORS: dict[int, tuple[str, str | None, str, str]] = {
    400: ("invalid_request_error", None, "invalid_request_error", "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "authentication_error", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "permission_error",
          "Your API key does not have permission to use this resource."),
    404: ("invalid_request_error", "model_not_found", "not_found_error", "The model does not exist."),
    422: ("invalid_request_error", None, "invalid_request_error", "Unprocessable request."),
    429: ("requests", "rate_limit_exceeded", "rate_limit_error", "Rate limit reached; please slow down."),
    500: ("server_error", None, "api_error", "The server had an error while processing your request."),
    503: ("server_error", None, "api_error", "Service unavailable."),
    529: ("server_error", None, "overloaded_error", "Overloaded"),
}
_CONTEXT_MESSAGES = {
    "openai": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
              "130000 tokens. Please reduce the length of the messages.",
    "anthropic": "prompt is too long: 210000 tokens > 200000 maximum",
}
_CONTEXT_MESSAGES["responses"] = _CONTEXT_MESSAGES["openai"]
_ANTHROPIC_TYPES = {t[2] for t in _ERRORS.values()}


def error_body(dialect: Dialect, reply: Reply) -> dict[str, Any]:
    o_type, o_code, a_type, message = _ERRORS.get(reply.status, _ERRORS[500 if reply.status >= 500 else 400])
    if reply.code == "context_length_exceeded":
        message, o_code = _CONTEXT_MESSAGES[dialect], reply.code
    elif reply.code:
        o_code = reply.code
    message = reply.message or message
    if dialect != "anthropic":
        return {"error": {"message": message, "type": o_type, "param": None, "code": o_code}}
    a_type = reply.code if reply.code in _ANTHROPIC_TYPES else a_type
    return {"type": "error", "error": {"type": a_type, "message": message}, "request_id": f"req_fake{next(_ids)}"}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), max(1, size))]


def _stop(dialect: Dialect, reply: Reply) -> str:
    return _STOPS[dialect][reply.stop or ("tool_use" if reply.calls else "end_turn")]


Frame = tuple[str, bool]  # (SSE text, counts as a content chunk)


def openai_frames(reply: Reply, model: str, usage: Tokens, include_usage: bool) -> list[Frame]:
    base = {"id": f"chatcmpl-fake{next(_ids)}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "service_tier": "default", "system_fingerprint": "fp_fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body)}\n\n"

    frames: list[Frame] = [(chunk({"role": "assistant", "content": "", "refusal": None}), False)]
    for thought in reply.thoughts:  # vLLM / DeepSeek style reasoning
        frames += [(chunk({"reasoning_content": p}), True) for p in _pieces(thought.text, reply.chunk_size)]
    frames += [(chunk({"content": p}), True) for p in _pieces(reply.content, reply.chunk_size)]
    for i, call in enumerate(reply.calls):
        head = {"index": i, "id": call.id or f"call_fake{next(_ids)}", "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        frames.append((chunk({"tool_calls": [head]}), True))
        frames += [(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}), True)
                   for p in _pieces(call.arguments_json, reply.chunk_size)]
    frames.append((chunk({}, _stop("openai", reply)), False))
    if include_usage:
        body = {**base, "choices": [], "usage": _openai_usage(usage)}
        frames.append((f"data: {json.dumps(body)}\n\n", False))
    frames.append(("data: [DONE]\n\n", False))
    return frames


def _openai_usage(u: Tokens) -> dict[str, Any]:
    return {"prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output,
            "prompt_tokens_details": {"cached_tokens": u.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def _anthropic_usage(u: Tokens) -> dict[str, Any]:
    return {"input_tokens": u.input - u.cache_read - u.cache_write, "cache_creation_input_tokens": u.cache_write,
            "cache_read_input_tokens": u.cache_read, "output_tokens": u.output}


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    """The final content blocks, as a non-streamed Anthropic message holds them."""
    blocks: list[dict[str, Any]] = []
    for t in reply.thoughts:
        blocks.append({"type": "redacted_thinking", "data": t.redacted_data} if t.redacted_data is not None
                      else {"type": "thinking", "thinking": t.text, "signature": t.signature})
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for call in reply.calls:
        try:
            parsed = json.loads(call.arguments_json)
        except ValueError:
            parsed = {}
        blocks.append({"type": "tool_use", "id": call.id or f"toolu_fake{next(_ids)}", "name": call.name,
                       "input": parsed, "_raw": call.arguments_json})
    return blocks


def anthropic_frames(reply: Reply, model: str, usage: Tokens) -> list[Frame]:
    def ev(kind: str, **data: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    start_usage = {**_anthropic_usage(usage), "output_tokens": 1}
    frames: list[Frame] = [
        (ev("message_start", message={"id": f"msg_fake{next(_ids)}", "type": "message", "role": "assistant",
                                      "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                                      "usage": start_usage}), False),
        (ev("ping"), False),
    ]
    size = reply.chunk_size
    for i, block in enumerate(_blocks(reply)):
        kind = block["type"]
        if kind == "redacted_thinking":
            frames.append((ev("content_block_start", index=i, content_block=block), True))
        elif kind == "thinking":
            frames.append((ev("content_block_start", index=i,
                              content_block={"type": "thinking", "thinking": "", "signature": ""}), False))
            frames += [(ev("content_block_delta", index=i, delta={"type": "thinking_delta", "thinking": p}), True)
                       for p in _pieces(block["thinking"], size)]
            frames.append((ev("content_block_delta", index=i,
                              delta={"type": "signature_delta", "signature": block["signature"]}), False))
        elif kind == "text":
            frames.append((ev("content_block_start", index=i, content_block={"type": "text", "text": ""}), False))
            frames += [(ev("content_block_delta", index=i, delta={"type": "text_delta", "text": p}), True)
                       for p in _pieces(block["text"], size)]
        else:
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            frames.append((ev("content_block_start", index=i, content_block=head), True))
            frames += [(ev("content_block_delta", index=i, delta={"type": "input_json_delta", "partial_json": p}),
                        True) for p in ["", *_pieces(block["_raw"], size)]]
        frames.append((ev("content_block_stop", index=i), False))
    frames.append((ev("message_delta", delta={"stop_reason": _stop("anthropic", reply), "stop_sequence": None},
                      usage=_anthropic_usage(usage)), False))
    frames.append((ev("message_stop"), False))
    return frames


def whole_response(dialect: Dialect, reply: Reply, model: str, usage: Tokens) -> dict[str, Any]:
    """A non-streamed answer."""
    if dialect == "responses":
        return llm_responses.whole(reply.thoughts, reply.content, reply.calls, _stop(dialect, reply), model,
                                   _responses_usage(usage))
    if dialect == "anthropic":
        content = [{k: v for k, v in b.items() if k != "_raw"} for b in _blocks(reply)]
        return {"id": f"msg_fake{next(_ids)}", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": _stop(dialect, reply), "stop_sequence": None,
                "usage": _anthropic_usage(usage)}
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None, "refusal": None,
                               "annotations": []}
    if reply.calls:
        message["tool_calls"] = [{"id": c.id or f"call_fake{next(_ids)}", "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments_json}} for c in reply.calls]
    return {"id": f"chatcmpl-fake{next(_ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                         "finish_reason": _stop(dialect, reply)}],
            "usage": _openai_usage(usage), "service_tier": "default", "system_fingerprint": "fp_fake"}


def _responses_usage(u: Tokens) -> dict[str, Any]:
    return llm_responses.usage_of(u.input, u.output, u.cache_read, u.cache_write)


def stream_error_frame(dialect: Dialect) -> str:
    if dialect == "responses":
        return llm_responses.error_frame()
    if dialect == "anthropic":
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return f"event: error\ndata: {json.dumps(body)}\n\n"
    body = {"error": {"message": "The server had an error while processing your request.",
                      "type": "server_error", "param": None, "code": None}}
    return f"data: {json.dumps(body)}\n\n"


# ----------------------------------------------------------------------------- requests


_CONTEXT_BLOCK = re.compile(r"\n\n<chatgate-context[^>]*>\n.*?\n</chatgate-context>", re.DOTALL)


def without_context(text: str) -> str:
    """``text`` without the runtime context chatgate appends to the newest user turn."""
    return _CONTEXT_BLOCK.sub("", text)


def last_user_text(body: Any) -> str:
    """The newest user text, without the runtime context chatgate appends to it."""
    if isinstance(body, dict) and "input" in body:  # the Responses API
        return llm_responses.user_text(body, without_context)
    for message in reversed((body or {}).get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return _CONTEXT_BLOCK.sub("", content)
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        if texts:
            return _CONTEXT_BLOCK.sub("", "".join(texts))
    return ""


async def _body(request: web.Request) -> Any:
    try:
        return await request.json()  # aiohttp keeps the body: a second read is free
    except ValueError:
        return None


def is_title_request(body: Any) -> bool:
    """A session title asked for by chatgate (in any dialect)."""
    if not isinstance(body, dict):
        return False
    system = body.get("instructions") or body.get("system")
    if isinstance(system, list):  # Anthropic's blocks
        system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
    if system is None:
        first = (body.get("messages") or [{}])[0]
        system = first.get("content") if first.get("role") == "system" else None
    return isinstance(system, str) and system.startswith(TITLE_MARKER)


def estimated_prompt_tokens(body: Any) -> int:
    """The prompt tokens the fake reports when no usage is scripted: the messages' JSON / 4."""
    body = body or {}
    return max(1, len(json.dumps(body.get("messages", body.get("input", [])))) // 4)


def tool_pairing_problems(dialect: Dialect, body: Any) -> list[str]:
    """Every tool result follows the assistant call with its id; every call has a result."""
    if dialect == "responses":
        return llm_responses.pairing_problems(body)
    problems: list[str] = []
    pending: list[Any] = []  # the last assistant turn's call ids still without a result

    def close(where: str) -> None:
        problems.extend(f"{where}: tool call {c!r} has no result" for c in pending)
        pending.clear()

    def answer(where: str, call_id: Any) -> None:
        if call_id in pending:
            pending.remove(call_id)
        else:
            problems.append(f"{where}: tool result {call_id!r} follows no call with that id")

    for n, message in enumerate((body or {}).get("messages") or []):
        where, role, content = f"message {n}", message.get("role"), message.get("content")
        if dialect == "openai":
            if role == "tool":
                answer(where, message.get("tool_call_id"))
                continue
            close(where)
            if role == "assistant":
                pending.extend(c.get("id") for c in message.get("tool_calls") or [])
            continue
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        kinds = [b.get("type") for b in blocks]
        if role == "user":
            if "tool_result" in kinds and kinds != sorted(kinds, key=lambda k: k != "tool_result"):
                problems.append(f"{where}: tool_result blocks must come first")
            for b in blocks:
                if b.get("type") == "tool_result":
                    answer(where, b.get("tool_use_id"))
            close(where)
        else:
            close(where)
            pending.extend(b.get("id") for b in blocks if b.get("type") == "tool_use")
    close("end")
    return problems


class PromptCache:
    """Anthropic's prompt cache, roughly: a breakpoint (``cache_control``) writes the prefix
    up to it; a later request reads the longest cached prefix that ends at one of its
    breakpoints or at one of the 20 blocks before each. Tokens are JSON characters / 4."""

    LOOKBACK = 20

    def __init__(self) -> None:
        self.prefixes: set[str] = set()

    @staticmethod
    def _segments(body: dict[str, Any]) -> list[tuple[str, bool]]:
        """(canonical JSON, is a breakpoint) of every block, in cache order: tools, system, messages."""
        def clean(block: Any) -> str:
            plain = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
            return json.dumps(plain, sort_keys=True)

        segments = [(clean(t), False) for t in body.get("tools") or []]
        system = body.get("system")
        for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system or []):
            segments.append((clean(block), "cache_control" in block))
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            segments += [(message["role"] + clean(b), isinstance(b, dict) and "cache_control" in b) for b in blocks]
        return segments

    def use(self, body: dict[str, Any]) -> Tokens:
        segments = self._segments(body)
        digests, sizes, running, size = [], [], hashlib.sha256(), 0
        for text, _ in segments:
            running.update(text.encode())
            size += len(text)
            digests.append(running.copy().hexdigest())
            sizes.append(size // 4)
        breakpoints = [i for i, (_, mark) in enumerate(segments) if mark]
        read = 0
        for b in breakpoints:
            for j in range(b, max(-1, b - self.LOOKBACK - 1), -1):
                if digests[j] in self.prefixes:
                    read = max(read, sizes[j])
                    break
        written = max(0, sizes[breakpoints[-1]] - read) if breakpoints else 0
        self.prefixes.update(digests[b] for b in breakpoints)
        total = max(1, sizes[-1]) if sizes else 1
        return Tokens(input=total, output=5, cache_read=read, cache_write=min(written, total - read))


# ----------------------------------------------------------------------------- server


class FakeLLM:
    """The fake server. ``async with FakeLLM() as llm``; ``port=0`` picks a free port."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, model: str | None = None,
                 strict_pairing: bool = False, responder: Callable[[Any], Reply] | None = None,
                 prompt_cache: bool = False, titles: Literal["aside", "script"] = "aside",
                 api_key: str | None = None) -> None:
        """``strict_pairing``: a request with a broken tool call / result pairing is refused
        with 400, as the real APIs do, and noted in ``pairing_problems``. ``responder``:
        when the script is empty, the reply is ``responder(body)`` instead of the echo.
        ``api_key``: a request with another key (``Authorization: Bearer`` or ``x-api-key``) is
        answered 401 as the real APIs do, and not recorded."""
        self.host, self.port, self.model = host, port, model
        self.strict_pairing, self.responder = strict_pairing, responder
        # ``prompt_cache``: Anthropic requests report cache reads and writes (``PromptCache``)
        self.prompt_cache = PromptCache() if prompt_cache else None
        self.reported: dict[int, Tokens] = {}  # request index -> the usage its answer reported
        self.titles = titles
        self.api_key = api_key
        self.title_requests: list[Received] = []  # the title requests answered aside
        self.pairing_problems: list[str] = []
        self.requests: list[Received] = []
        self._script: deque[Reply] = deque()
        self._arrived = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def disconnects(self) -> list[asyncio.Event]:
        """Per request, set when its client went away before the response was complete."""
        return [r.disconnected for r in self.requests]

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one (an echo when none is left)."""
        self._script.extend(replies)

    async def wait_for_requests(self, count: int, timeout: float = 2.0) -> None:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    def assert_tool_pairing(self) -> None:
        problems = [f"request {r.index}: {p}" for r in self.requests for p in tool_pairing_problems(r.dialect, r.body)]
        assert not problems, "\n".join(problems)

    async def __aenter__(self) -> FakeLLM:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/responses", self._handle)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        if self.api_key is not None:
            given = request.headers.get("x-api-key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                dialect: Dialect = "anthropic" if request.path == "/v1/messages" else "openai"
                return web.json_response(error_body(dialect, Reply.error(401)), status=401)
        if self.titles == "aside" and is_title_request(body):
            aside = Received(-1, request.path, {}, body, Reply.text(FAKE_TITLE))
            self.title_requests.append(aside)
            return await FakeLLM._respond(self, request, aside)
        if self._script:
            reply = self._script.popleft()
        elif self.responder is not None:
            reply = self.responder(body)
        else:
            reply = Reply.text("echo: " + last_user_text(body))
        received = Received(len(self.requests), request.path, {k.lower(): v for k, v in request.headers.items()},
                            body, reply)
        async with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()
        try:
            response = await self._respond(request, received)
        except (asyncio.CancelledError, ConnectionError):
            received.ended.append(time.monotonic())
            if not self._stopping.is_set():
                received.disconnected.set()
            raise
        received.ended.append(time.monotonic())
        received.finished.set()
        return response

    async def _respond(self, request: web.Request, received: Received) -> web.StreamResponse:
        reply, dialect = received.reply, received.dialect
        body = received.body if isinstance(received.body, dict) else {}
        model = self.model or body.get("model") or "fake-model"
        stream = bool(body.get("stream"))
        if self.strict_pairing and (problems := tool_pairing_problems(dialect, body)):
            self.pairing_problems.extend(f"request {received.index}: {p}" for p in problems)
            refusal = Reply.error(400, message="messages: " + "; ".join(problems))
            return web.json_response(error_body(dialect, refusal), status=400)
        if reply.kind == "hang":
            await self._stopping.wait()
            return web.Response(status=503)
        if reply.kind == "error":
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after"] = str(reply.retry_after)
            if reply.retry_after_ms is not None:
                headers["retry-after-ms"] = str(reply.retry_after_ms)
            return web.json_response(error_body(dialect, reply), status=reply.status, headers=headers)
        if reply.kind == "failed":
            return web.Response(text=llm_responses.failed_frames(model, reply.code or "server_error",
                                                                 reply.message or ""),
                                content_type="text/event-stream")
        if reply.kind == "malformed":
            if stream:
                text = {"anthropic": 'event: message_start\ndata: {"type": "message_start", "message": {\n\n',
                        "responses": llm_responses.MALFORMED,
                        "openai": 'data: {"id": "chatcmpl-broken", "choices": [\n\n'}[dialect]
                return web.Response(text=text, content_type="text/event-stream")
            return web.Response(text='{"id": "broken", ', content_type="application/json")
        if reply.usage is None and self.prompt_cache is not None and dialect == "anthropic":
            cached = self.prompt_cache.use(body)
            reply = dataclasses.replace(reply, usage=dataclasses.replace(cached, output=max(1, len(reply.content) // 4)))
        usage = reply.usage or Tokens(input=estimated_prompt_tokens(body),
                                      output=max(1, (len(reply.content) + sum(len(c.arguments_json)
                                                                                for c in reply.calls)) // 4))
        self.reported[received.index] = usage
        if not stream:
            return web.json_response(whole_response(dialect, reply, model, usage))
        if dialect == "anthropic":
            frames = anthropic_frames(reply, model, usage)
        elif dialect == "responses":
            frames = llm_responses.frames(reply.thoughts, reply.content, reply.calls, _stop(dialect, reply), model,
                                          _responses_usage(usage), reply.chunk_size)
        else:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            frames = openai_frames(reply, model, usage, include)
        return await self._stream(request, reply, dialect, frames)

    async def _stream(self, request: web.Request, reply: Reply, dialect: Dialect,
                      frames: list[Frame]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8",
                                               "cache-control": "no-cache"})
        await response.prepare(request)
        sent = 0
        for frame, is_content in frames:
            if is_content and reply.cut_after is not None and sent >= reply.cut_after:
                assert request.transport is not None
                request.transport.abort()  # a broken connection, not a clean end
                return response
            if is_content and reply.error_after is not None and sent >= reply.error_after:
                await response.write(stream_error_frame(dialect).encode())
                break
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if self._stopping.is_set():
                break
            await response.write(frame.encode())
            sent += is_content
        await response.write_eof()
        return response


# ----------------------------------------------------------------------------- standalone


class _Standalone(FakeLLM):
    """The server for another process: an optional default reply instead of the echo, and
    with ``control`` replies scripted and requests reported as JSON lines on stdin/stdout."""

    def __init__(self, *, default: Reply | None = None, control: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.default, self.control = default, control
        self.queued: deque[Reply] = deque()  # scripted over stdin

    def report(self, **fields: Any) -> None:
        if self.control:
            sys.stdout.write(json.dumps(fields) + "\n")
            sys.stdout.flush()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.titles == "aside" and is_title_request(await _body(request)):
            return await super()._handle(request)
        # One reply handed over per request, so a default never jumps ahead of a scripted one.
        reply = self.queued.popleft() if self.queued else self.default
        if reply is not None:
            self._script.append(reply)
        return await super()._handle(request)

    async def _respond(self, request: web.Request, received: Received) -> web.StreamResponse:
        body = received.body if isinstance(received.body, dict) else {}
        self.report(request=received.index, at=time.monotonic(), user=last_user_text(body),
                    prompt_tokens=estimated_prompt_tokens(body))
        request["index"] = received.index
        try:
            return await super()._respond(request, received)
        except (asyncio.CancelledError, ConnectionError):
            if not self._stopping.is_set():
                self.report(disconnected=received.index, at=time.monotonic())
            raise

    async def _stream(self, request: web.Request, reply: Reply, dialect: Dialect,
                      frames: list[Frame]) -> web.StreamResponse:
        if not self.control or "index" not in request:  # a title made aside is not watched
            return await super()._stream(request, reply, dialect, frames)
        watched = self._first_token(frames, request["index"])
        return await super()._stream(request, reply, dialect, watched)  # type: ignore[arg-type]  # only iterated

    def _first_token(self, frames: list[Frame], index: int) -> Iterator[Frame]:
        """The frames, reporting ``first_token`` once the first content frame is written: the
        stream loop asks for the next frame right after writing one."""
        reported = False
        for frame in frames:
            yield frame
            if frame[1] and not reported:
                self.report(first_token=index, at=time.monotonic())
                reported = True


def _reply_from_json(spec: dict[str, Any]) -> Reply:
    """A ``Reply`` from its JSON form, ``dataclasses.asdict(reply)``."""
    usage = spec.get("usage")
    return Reply(**{**spec, "calls": tuple(Call(**c) for c in spec.get("calls", ())),
                    "thoughts": tuple(Thought(**t) for t in spec.get("thoughts", ())),
                    "usage": Tokens(**usage) if usage else None})


async def _read_scripts(llm: _Standalone, stop: asyncio.Event) -> None:
    """Each stdin line is a JSON list of replies to queue, acknowledged with ``{"scripted": n}``;
    end of input stops the server (the controlling process has gone)."""
    reader = asyncio.StreamReader(limit=1 << 20)
    pipe, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                                  sys.stdin)
    try:
        while line := await reader.readline():
            replies = [_reply_from_json(spec) for spec in json.loads(line)]
            llm.queued.extend(replies)
            llm.report(scripted=len(replies))
    finally:
        pipe.close()
        stop.set()


async def _serve(host: str, port: int, default: Reply | None, control: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with _Standalone(host=host, port=port, default=default, control=control) as llm:
        print(llm.base_url, flush=True)
        reader = asyncio.create_task(_read_scripts(llm, stop)) if control else None
        try:
            await stop.wait()
        finally:
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader  # raises what made it fail (bad input)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI + Anthropic server answering with echoes.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument("--tokens", type=int, default=0, metavar="N",
                        help="instead of the echo, answer N tokens (\"tok \", one per chunk)")
    parser.add_argument("--stream-seconds", type=float, default=0.0, metavar="S",
                        help="with --tokens: spread the answer over S seconds (OpenAI: the N chunks and 4 "
                             "framing events evenly; Anthropic has a few more events, so slightly longer)")
    parser.add_argument("--control", action="store_true",
                        help="read replies to script as JSON lines on stdin (a list of dataclasses.asdict(Reply)), "
                             "report as JSON lines on stdout, each with time.monotonic() as \"at\": requests "
                             "({\"request\": n, \"user\": last user text, \"prompt_tokens\": the usage reported}), "
                             "the first content chunk written ({\"first_token\": n}) and disconnects "
                             "({\"disconnected\": n}); stop at end of input")
    args = parser.parse_args(argv)
    default = None
    if args.tokens > 0:
        default = Reply.text("tok " * args.tokens, chunk_size=4, delay=args.stream_seconds / (args.tokens + 4))
    asyncio.run(_serve(args.host, args.port, default, args.control))


if __name__ == "__main__":
    main()


__all__ = ["Call", "FakeLLM", "PromptCache", "without_context", "Received", "Reply", "Thought", "Tokens", "tool_pairing_problems"]
