"""The fake LLM's OpenAI Responses dialect (``POST /v1/responses``): a ``Reply`` rendered as
the API streams it, and the request's ``input`` items read back.

A stream is ``response.created`` and ``response.in_progress``, then each output item between
``response.output_item.added`` and ``response.output_item.done`` (reasoning with its summary
deltas and ``encrypted_content``; the message with ``content_part`` and
``output_text.delta`` events; each function call with ``function_call_arguments.delta``),
then ``response.completed`` or ``response.incomplete`` with the usage. Every event carries
its ``sequence_number``; there is no ``[DONE]``. An error inside the stream is the nested
``{"type": "error", "error": {...}}`` the API sends.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

_ids = itertools.count(1)

# neutral stop -> how the response ends: completed, or incomplete with this reason
STOPS = {"end_turn": "completed", "tool_use": "completed", "max_tokens": "max_output_tokens",
         "stop_sequence": "completed", "content_filter": "content_filter", "refusal": "content_filter"}

Frame = tuple[str, bool]  # (SSE text, counts as a content chunk)


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), max(1, size))]


def usage_of(input_tokens: int, output: int, cache_read: int, cache_write: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cache_read, "cache_write_tokens": cache_write},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output}


def output_items(thoughts: Any, content: str, calls: Any) -> list[dict[str, Any]]:
    """The finished output items of a reply: reasoning, the message, the function calls."""
    items: list[dict[str, Any]] = []
    for thought in thoughts:
        item_id = f"rs_fake{next(_ids)}"
        encrypted = thought.redacted_data if thought.redacted_data is not None else (
            thought.signature or f"enc-{item_id}")
        items.append({"id": item_id, "type": "reasoning",
                      "summary": [{"type": "summary_text", "text": thought.text}] if thought.text else [],
                      "encrypted_content": encrypted})
    if content:
        items.append({"id": f"msg_fake{next(_ids)}", "type": "message", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": content, "annotations": [], "logprobs": []}]})
    for call in calls:
        items.append({"id": f"fc_fake{next(_ids)}", "type": "function_call",
                      "call_id": call.id or f"call_fake{next(_ids)}", "name": call.name,
                      "arguments": call.arguments_json, "status": "completed"})
    return items


def response_object(model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                    end: str = "completed", response_id: str | None = None) -> dict[str, Any]:
    return {"id": response_id or f"resp_fake{next(_ids)}", "object": "response", "created_at": int(time.time()),
            "status": status, "model": model, "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "error": None, "usage": usage,
            "incomplete_details": {"reason": end} if status == "incomplete" else None}


def frames(thoughts: Any, content: str, calls: Any, stop: str, model: str, usage: dict[str, Any],
           size: int) -> list[Frame]:
    seq = itertools.count()
    response_id = f"resp_fake{next(_ids)}"

    def ev(kind: str, **data: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(seq), **data})}\n\n"

    start = response_object(model, "in_progress", [], None, response_id=response_id)
    out: list[Frame] = [(ev("response.created", response=start), False),
                        (ev("response.in_progress", response=start), False)]
    items = output_items(thoughts, content, calls)
    for index, item in enumerate(items):
        at: dict[str, Any] = {"item_id": item["id"], "output_index": index}
        kind = item["type"]
        if kind == "reasoning":
            out.append((ev("response.output_item.added", output_index=index,
                           item={"id": item["id"], "type": "reasoning", "summary": []}), False))
            for n, part in enumerate(item["summary"]):
                empty = {"type": "summary_text", "text": ""}
                out.append((ev("response.reasoning_summary_part.added", **at, summary_index=n, part=empty), False))
                out += [(ev("response.reasoning_summary_text.delta", **at, summary_index=n, delta=p), True)
                        for p in pieces(part["text"], size)]
                out.append((ev("response.reasoning_summary_text.done", **at, summary_index=n, text=part["text"]),
                            False))
                out.append((ev("response.reasoning_summary_part.done", **at, summary_index=n, part=part), False))
        elif kind == "message":
            text = item["content"][0]["text"]
            out.append((ev("response.output_item.added", output_index=index,
                           item={**item, "status": "in_progress", "content": []}), False))
            empty = {"type": "output_text", "text": "", "annotations": []}
            out.append((ev("response.content_part.added", **at, content_index=0, part=empty), False))
            out += [(ev("response.output_text.delta", **at, content_index=0, delta=p, logprobs=[]), True)
                    for p in pieces(text, size)]
            out.append((ev("response.output_text.done", **at, content_index=0, text=text, logprobs=[]), False))
            out.append((ev("response.content_part.done", **at, content_index=0, part=item["content"][0]), False))
        else:
            out.append((ev("response.output_item.added", output_index=index,
                           item={**item, "arguments": "", "status": "in_progress"}), True))
            out += [(ev("response.function_call_arguments.delta", **at, delta=p), True)
                    for p in pieces(item["arguments"], size)]
            out.append((ev("response.function_call_arguments.done", **at, name=item["name"],
                           arguments=item["arguments"]), False))
        out.append((ev("response.output_item.done", output_index=index, item=item), False))
    status = "completed" if stop == "completed" else "incomplete"
    end = response_object(model, status, items, usage, stop, response_id)
    out.append((ev(f"response.{status}", response=end), False))
    return out


def whole(thoughts: Any, content: str, calls: Any, stop: str, model: str, usage: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed answer."""
    items = output_items(thoughts, content, calls)
    return response_object(model, "completed" if stop == "completed" else "incomplete", items, usage, stop)


def error_frame() -> str:
    body = {"type": "error", "sequence_number": 2, "error": {
        "type": "server_error", "code": "server_error",
        "message": "The server had an error while processing your request.", "param": None}}
    return f"event: error\ndata: {json.dumps(body)}\n\n"


def failed_frames(model: str, code: str, message: str) -> str:
    """``response.created``, then ``response.failed`` with ``error.code``."""
    start = response_object(model, "in_progress", [], None)
    failed = {**start, "status": "failed", "error": {"code": code, "message": message}}
    return "".join(f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, 'response': r})}\n\n"
                   for n, (kind, r) in enumerate((("response.created", start), ("response.failed", failed))))


MALFORMED = 'event: response.created\ndata: {"type": "response.created", "response": {\n\n'


def user_text(body: Any, strip: Any) -> str:
    """The newest user text of a request's ``input`` (``strip`` removes chatgate's runtime context)."""
    items = (body or {}).get("input")
    if isinstance(items, str):
        return strip(items)
    for item in reversed(items or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return strip(content)
        texts = [c.get("text", "") for c in content or [] if isinstance(c, dict) and c.get("type") == "input_text"]
        if texts:
            return strip("".join(texts))
    return ""


def pairing_problems(body: Any) -> list[str]:
    """Every function_call_output follows its function_call; every call has an output before
    the next message."""
    problems: list[str] = []
    pending: list[Any] = []

    def close(where: str) -> None:
        problems.extend(f"{where}: function call {c!r} has no output" for c in pending)
        pending.clear()

    for n, item in enumerate((body or {}).get("input") or []):
        where, kind = f"item {n}", item.get("type", "message")
        if kind == "function_call":
            pending.append(item.get("call_id"))
        elif kind == "function_call_output":
            if item.get("call_id") in pending:
                pending.remove(item.get("call_id"))
            else:
                problems.append(f"{where}: output {item.get('call_id')!r} follows no call with that id")
        elif kind != "reasoning":
            close(where)
    close("end")
    return problems
