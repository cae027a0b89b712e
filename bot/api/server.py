"""The API's HTTP server (aiohttp): the key at the door, then each endpoint.

Every ``/v1`` request needs ``Authorization: Bearer <key>`` (401 otherwise, in OpenAI's
error shape). A chat completion or a response is a message of the key's person: admitted
(``Door.admit``: 403, 429 with ``Retry-After``), placed in its session (``bot.api.sessions``),
stored and run in its lane; the answer comes back through the ``api`` channel: streamed
(Server-Sent Events) or whole once the turn is stored. A client that goes away stops the
run as ``/stop`` does (the server cancels a handler whose client disconnected).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.api import keys as keys_table
from bot.api import sessions, wire
from bot.api.channel import ExchangeChannel, Item, Watch
from bot.api.door import Door, Sent
from bot.api.people import Person, person_named
from bot.api.wire import ApiError, Request, Said
from bot.conversation import ChannelInfo, Conversation

log = logging.getLogger(__name__)

AGENT_MODEL = "chatgate"
INFO = ChannelInfo("api", "an app through the OpenAI-compatible API",
                   "The answer goes to an app through the OpenAI API: plain Markdown.")
SESSION_HEADER = "X-Chatgate-Session"


@dataclass(frozen=True, slots=True)
class ModelEntry:
    id: str
    who: Callable[[Person, bool], bool] = lambda person, owner: True  # may this person use it


@dataclass(slots=True)
class Outcome:
    """What a run gave back: the text as the client got it, the final answer, the usage."""

    content: str = ""
    final: str = ""
    usage: tuple[int, int] = (0, 0)
    outcome: str = ""  # completed, silent, failed, stopped
    says: list[str] = field(default_factory=list)


class ApiServer:
    def __init__(self, door: Door, channel: ExchangeChannel, store: Any, *, agent: str,
                 identity_links: Any, models: Callable[[Person, bool], Sequence[str]],
                 choose: Callable[[Conversation, str, Person], Any], max_bytes: int) -> None:
        self._door, self._channel, self._store = door, channel, store
        self._agent, self._links = agent, identity_links
        self._models, self._choose = models, choose
        self.app = web.Application(client_max_size=max_bytes, middlewares=[self._errors])
        self.app.router.add_get("/v1/models", self._list_models)
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_post("/v1/responses", self._responses)

    # -- the door ------------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
            return web.json_response(exc.body(), status=exc.status, headers=headers)
        except web.HTTPRequestEntityTooLarge:
            return web.json_response(ApiError(413, "the request is too large").body(), status=413)
        except web.HTTPNotFound:
            return web.json_response(ApiError(404, f"no such endpoint: {request.path}", code="not_found").body(),
                                     status=404)
        except web.HTTPMethodNotAllowed:
            return web.json_response(ApiError(405, f"{request.method} is not allowed here").body(), status=405)

    async def _person(self, request: web.Request) -> Person:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not keys_table.looks_like_a_key(key):
            raise ApiError(401, "a key is needed: Authorization: Bearer <key> (chatgate api key create)",
                           "invalid_request_error", code="invalid_api_key")
        found = await self._store.read(keys_table.key_of(key))
        if found is None:
            raise ApiError(401, "this key is not valid (unknown or revoked)", code="invalid_api_key")
        person = person_named(found.person, self._links)
        if person is None:
            raise ApiError(401, "this key's person is not known here any more", code="invalid_api_key")
        return person

    async def _body(self, request: web.Request) -> Any:
        try:
            return await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(400, "the body is not valid JSON") from None

    # -- endpoints -----------------------------------------------------------------------

    async def _list_models(self, request: web.Request) -> web.Response:
        person = await self._person(request)
        names = self._models(person, self._door.owner(person))
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "chatgate"} for name in names]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        person = await self._person(request)
        asked = wire.chat_request(await self._body(request), request.headers.get(SESSION_HEADER))
        return await self._answer(request, person, asked, "chat")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        person = await self._person(request)
        asked = wire.responses_request(await self._body(request), request.headers.get(SESSION_HEADER))
        return await self._answer(request, person, asked, "responses")

    # -- one message, one answer ---------------------------------------------------------

    async def _thread(self, person: Person, asked: Request) -> str:
        if asked.name is not None:
            return sessions.named(person.name, asked.name)
        if asked.previous_response_id is not None:
            found = await self._store.read(sessions.thread_of(
                sessions.response_key(person.name, asked.previous_response_id)))
            if found is None:
                raise ApiError(404, f"no response {asked.previous_response_id!r} of yours to continue",
                               param="previous_response_id", code="previous_response_not_found")
            return str(found)
        if len(asked.history) > 1:
            found = await self._store.read(sessions.thread_of(sessions.fingerprint(person.name, asked.history[:-1])))
            if found is not None:
                return str(found)
        return sessions.new_thread()

    async def _answer(self, request: web.Request, person: Person, asked: Request, kind: str) -> web.StreamResponse:
        if asked.model not in self._models(person, self._door.owner(person)):
            raise ApiError(404, f"no model {asked.model!r} for you here; see GET /v1/models", param="model",
                           code="model_not_found")
        thread = await self._thread(person, asked)
        refusal = await self._door.admit(person)
        if refusal is not None:
            raise refusal
        conversation = Person.conversation(person, self._agent, "api", thread, INFO)
        if asked.model != AGENT_MODEL:
            await self._choose(conversation, asked.model, person)
        watch = self._channel.watch(thread, Watch(person.name))
        sent: Sent | None = None
        try:
            sent = await self._door.send(person, conversation, asked.text, f"{kind}-{secrets.token_hex(8)}")
            if sent is None:
                raise ApiError(429, "this conversation is busy: too many messages wait in it", code="busy",
                               retry_after=5)
            created = int(time.time())
            rid = ("chatcmpl-" if kind == "chat" else "resp_") + secrets.token_hex(12)
            if asked.stream:
                response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                       "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
                await response.prepare(request)
                stream = _ChatStream(rid, asked, created) if kind == "chat" else _ResponseStream(rid, asked, created)
                got = await stream.write(response, _items(watch, sent.ended))
                await response.write_eof()
            else:
                got = await _collect(_items(watch, sent.ended))
                if got.outcome == "failed":
                    raise ApiError(502, got.final or "the run failed", "server_error", code="run_failed")
                response = web.json_response(
                    wire.completion(rid, asked.model, created, got.content, got.usage) if kind == "chat" else
                    wire.response_object(rid, asked.model, created, "completed",
                                         [wire.message_item("msg_" + rid[5:], got.content)], got.usage,
                                         asked.previous_response_id))
            await self._remember(person, asked, thread, got, rid if kind == "responses" else None)
            return response
        finally:
            self._channel.unwatch(thread, watch)
            if sent is not None and not sent.ended.done():  # the client went away: /stop
                log.info("api client gone; run stopped session=%s", conversation.session_key)
                await asyncio.shield(self._door.stop(conversation))

    async def _remember(self, person: Person, asked: Request, thread: str, got: Outcome, rid: str | None) -> None:
        keys = {sessions.fingerprint(person.name, (*asked.history, Said("assistant", text)))
                for text in (got.content, got.final) if text}
        if rid is not None:
            keys.add(sessions.response_key(person.name, rid))
        await self._store.write(sessions.remember(sorted(keys), thread))


async def _items(watch: Watch, ended: asyncio.Future[str]) -> AsyncIterator[Item]:
    """What the chat is given until the turn is stored; then ``Item("ended", outcome=...)``."""
    while True:
        get: asyncio.Future[Item] = asyncio.ensure_future(watch.items.get())
        try:
            await asyncio.wait((get, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not get.done():
                get.cancel()
        if get.done() and not get.cancelled():
            yield get.result()
            continue
        while not watch.items.empty():
            yield watch.items.get_nowait()
        yield Item("ended", outcome=ended.result() if not ended.cancelled() else "stopped")
        return


async def _collect(items: AsyncIterator[Item]) -> Outcome:
    got = Outcome()
    ended = False
    async for item in items:
        if item.kind in ("say", "ask") and not ended:  # a question: as text (the client cannot press)
            got.says.append(item.text)
        elif item.kind == "end":
            ended = True
            got.final, got.usage, got.outcome = item.text, item.usage, item.outcome
        elif item.kind == "ended":
            got.outcome = "failed" if got.outcome == "failed" else item.outcome
    got.content = "\n\n".join([*got.says, got.final] if got.final else got.says)
    return got


class _Stream:
    """Writes one answer's events as they come; what it wrote, as an ``Outcome``."""

    def __init__(self, rid: str, asked: Request, created: int) -> None:
        self.rid, self.asked, self.created = rid, asked, created

    def begin(self) -> str:
        return ""

    def delta(self, text: str) -> str:
        raise NotImplementedError

    def finish(self, got: Outcome) -> str:
        raise NotImplementedError

    async def write(self, response: web.StreamResponse, items: AsyncIterator[Item]) -> Outcome:
        got = Outcome()
        streamed = ""  # this step's streamed text, since the last message said
        ended = False
        await response.write(self.begin().encode())
        async for item in items:
            piece = ""
            if item.kind == "delta" and not ended:
                piece, streamed = item.text, streamed + item.text
            elif item.kind in ("say", "ask") and not ended:
                piece, streamed = ("\n\n" if got.content else "") + item.text + "\n\n", ""
                got.says.append(item.text)
            elif item.kind == "end":
                ended = True
                got.final, got.usage, got.outcome = item.text, item.usage, item.outcome
                if item.text.startswith(streamed):
                    piece = item.text[len(streamed):]
                elif not streamed:
                    piece = item.text
            elif item.kind == "ended":
                got.outcome = "failed" if got.outcome == "failed" else item.outcome
            if piece:
                got.content += piece
                await response.write(self.delta(piece).encode())
        await response.write(self.finish(got).encode())
        return got


class _ChatStream(_Stream):
    def begin(self) -> str:
        return wire.chunk(self.rid, self.asked.model, self.created, {"role": "assistant", "content": ""},
                          include_usage=self.asked.include_usage)

    def delta(self, text: str) -> str:
        return wire.chunk(self.rid, self.asked.model, self.created, {"content": text},
                          include_usage=self.asked.include_usage)

    def finish(self, got: Outcome) -> str:
        out = wire.chunk(self.rid, self.asked.model, self.created, {}, "stop", include_usage=self.asked.include_usage)
        if self.asked.include_usage:
            out += wire.chunk(self.rid, self.asked.model, self.created, {}, usage=got.usage)
        return out + wire.DONE


class _ResponseStream(_Stream):
    def __init__(self, rid: str, asked: Request, created: int) -> None:
        super().__init__(rid, asked, created)
        self.events = wire.ResponseEvents(rid, asked.model, created, asked.previous_response_id)

    def begin(self) -> str:
        return self.events.start()

    def delta(self, text: str) -> str:
        return self.events.delta(text)

    def finish(self, got: Outcome) -> str:
        if got.outcome == "failed":
            return self.events.failed(got.final or "the run failed")
        return self.events.end(got.content, got.usage)
