"""A fake Telegram Bot API server on 127.0.0.1, so the real python-telegram-bot runs in tests.

    async with FakeTelegram() as tg:
        app = ApplicationBuilder().token(tg.token).base_url(tg.base_url) \\
            .base_file_url(tg.base_file_url).build()
        tg.push(tg.message(42, "/start"))          # an update for getUpdates
        sent = await tg.wait_for_sent(1)           # what the bot sent back
        tg.fail_next("sendMessage", retry_after=3) # the next sendMessage answers 429
        tg.fail_for("sendMessage", 15, status=502) # every sendMessage answers 502 for 15 s
        tg.hold("sendMessage"); tg.release("sendMessage")  # calls hang until released
        update = tg.press(chat_id, message_id, "allow", user_id=7)  # a button pressed (callback_query)

It behaves like Telegram where tests depend on it: ``{"ok": ..., "result" | "error_code",
"description", "parameters"}`` bodies with the real descriptions, 401 for a wrong token,
long polling with offsets that confirm updates, 409 while a webhook is set or when a newer
getUpdates supersedes a waiting one, the 4096 UTF-16 limit and the HTML parse mode with
Telegram's error messages (``telegram_html``), "message is not modified", per-chat message
ids, inline keyboards (``callback_data`` of 1 to 64 bytes, else BUTTON_DATA_INVALID; an
edit without a keyboard, or with an empty one, removes it) and presses on them: ``press``
queues a ``callback_query`` update, answerCallbackQuery is accepted once per press (then
"query is too old", as for an unknown id) and recorded in ``answers``. setMessageReaction
keeps the bot's one reaction per message in ``reactions`` ([] takes it away; "message to
react not found", REACTIONS_TOO_MANY for more than one). sendPhoto keeps
Telegram's rules for a photo: at most 10 MB (else PHOTO_SAVE_FILE_INVALID), a PNG's width
and height (read from its header) adding up to at most 10,000 and a ratio of at most 20
(else PHOTO_INVALID_DIMENSIONS), and a picture it can read (else IMAGE_PROCESS_FAILED).
Not modelled: MarkdownV2 validation (text is kept as sent), flood limits unless
injected, chats the bot cannot reach (inject "chat not found"). Times are ``time.monotonic()``.

Standalone, for benchmarks: ``python -m tests.fakes.telegram_server --port 0`` prints the API
root; ``POST /_control/push`` takes an Update or ``{"chat_id": .., "text": ..}``, or a list of
them, and answers with the time they were queued (``"at"``); ``GET /_control/sent?since=N``,
``GET /_control/edits?since=N`` and ``GET /_control/calls?method=getUpdates&since=N`` list
records, and with ``&wait=S`` hold the request up to S seconds until there is one;
``POST /_control/fail`` takes ``{"method": .., "seconds": .., "status": 502}`` (``fail_for``)
and answers with the time the outage ends (``"until"``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import inspect
import itertools
import json
import re
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.serving import serve
from tests.fakes.telegram_html import EntityParseError, parse_html, trim, utf16_len
from tests.fakes.telegram_objects import (
    JSON,
    Action,
    Call,
    CallbackAnswer,
    CommandsCall,
    Document,
    Edit,
    Failure,
    Sent,
    StoredFile,
    Webhook,
    build_message,
    default_chat,
)

Files = dict[str, web.FileField]  # multipart uploads of a request, by field name
MAX_TEXT, MAX_CAPTION = 4096, 1024
MAX_DOWNLOAD = 20 * 1024 * 1024  # getFile refuses bigger files
MAX_PHOTO = 10 * 1024 * 1024  # sendPhoto refuses bigger photos
CONFLICT_POLL = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
CONFLICT_WEBHOOK = ("Conflict: can't use getUpdates method while webhook is active; "
                    "use deleteWebhook to delete the webhook first")
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"
NOT_MODIFIED = ("Bad Request: message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message")
_DEFAULT_ERRORS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden: bot was blocked by the user",
                   404: "Not Found", 409: CONFLICT_POLL, 500: "Internal Server Error", 502: "Bad Gateway"}
_ACTIONS = {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
            "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}
_NOT_BY_DEFAULT = {"chat_member", "message_reaction", "message_reaction_count"}  # allowed_updates=[]
_TEXT_PARAMS = {"text", "caption", "parse_mode", "url", "secret_token", "action", "file_id", "language_code",
                "callback_query_id", "inline_message_id", "ip_address", "business_connection_id", "media_group_id"}


@dataclass(slots=True)
class _Pending:
    update: JSON
    sticky: bool = False  # a redelivery: survives offsets until delivered once
    delivered: bool = False

    @property
    def update_id(self) -> int:
        return int(self.update["update_id"])

    @property
    def kind(self) -> str:
        return next((k for k in self.update if k != "update_id"), "")


class ApiError(Exception):
    def __init__(self, status: int, description: str, parameters: JSON | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.parameters = status, description, parameters


def _bad(description: str) -> ApiError:
    return ApiError(400, "Bad Request: " + description)


def _check_photo(data: bytes) -> None:
    """Telegram's rules for what sendPhoto takes (PNG and JPEG read; a PNG's size from its header)."""
    if len(data) > MAX_PHOTO:
        raise _bad("PHOTO_SAVE_FILE_INVALID")
    if not data.startswith((b"\x89PNG", b"\xff\xd8")):
        raise _bad("IMAGE_PROCESS_FAILED")
    if data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        if not width or not height or width + height > 10_000 or max(width, height) > 20 * min(width, height):
            raise _bad("PHOTO_INVALID_DIMENSIONS")


_UNSET: Any = object()


# ----------------------------------------------------------------------------- server


class FakeTelegram:
    """The fake Bot API. ``async with FakeTelegram() as tg``; ``port=0`` picks a free port.

    ``strict_html`` (default) also rejects an unescaped ``&`` (see ``telegram_html``).
    """

    def __init__(self, *, token: str = "123456:TEST-TOKEN", bot_id: int | None = None,
                 username: str = "chatgate_bot", first_name: str = "chatgate", host: str = "127.0.0.1",
                 port: int = 0, strict_html: bool = True) -> None:
        self.token, self.host, self.port, self.strict_html = token, host, port, strict_html
        self.bot_id = bot_id if bot_id is not None else int(token.split(":")[0])
        self.username, self.first_name = username, first_name
        self.calls: list[Call] = []
        self.sent: list[Sent] = []
        self.edits: list[Edit] = []
        self.actions: list[Action] = []
        self.documents: list[Document] = []
        self.commands_calls: list[CommandsCall] = []
        self.answers: list[CallbackAnswer] = []  # answerCallbackQuery calls accepted
        self.reactions: dict[tuple[int | str, int], list[JSON]] = {}  # the bot's reaction to a message, as set last
        self.presses: dict[str, float] = {}  # callback query id -> when ``press`` queued it
        self.delivered: dict[int, float] = {}  # update_id -> when getUpdates first answered with it
        self.files: dict[str, StoredFile] = {}
        self.chats: dict[int | str, JSON] = {}
        self.messages: dict[tuple[int | str, int], JSON] = {}  # (chat_id, message_id) -> Message
        self.commands: dict[tuple[str, str], list[JSON]] = {}  # (scope JSON, language) -> BotCommands
        self.webhook: Webhook | None = None
        self.conflict = False  # when True every getUpdates answers 409 (another instance polls)
        self._failures: dict[str, deque[Failure]] = {}
        self._outages: dict[str, tuple[float, Failure]] = {}  # method -> (until, failure), see fail_for
        self._holds: dict[str, asyncio.Event] = {}  # method -> set when released, see hold
        self._pending: list[_Pending] = []
        self._allowed: set[str] | None = None  # the last allowed_updates, as Telegram remembers it
        self._update_ids = itertools.count(1)
        self._file_ids = itertools.count(1)
        self._query_ids = itertools.count(4_382_000_000_000_000_001)
        self._message_ids: dict[int | str, int] = {}
        self._poll_generation = 0
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        handlers: dict[str, Callable[[JSON, Files], Awaitable[Any]]] = {
            "getMe": self._get_me, "getUpdates": self._get_updates, "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook, "getWebhookInfo": self._get_webhook_info,
            "sendMessage": self._send_message, "editMessageText": self._edit_message_text,
            "deleteMessage": self._delete_message, "sendChatAction": self._send_chat_action,
            "sendDocument": self._send_document, "sendPhoto": self._send_photo, "getFile": self._get_file,
            "sendVoice": self._send_voice, "sendAudio": self._send_audio,
            "setMyCommands": self._set_my_commands, "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands, "answerCallbackQuery": self._answer_callback_query,
            "setMessageReaction": self._set_message_reaction,
        }
        self._handlers = {name.lower(): (name, fn) for name, fn in handlers.items()}

    # ------------------------------------------------------------------ addresses

    @property
    def api_root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """For ``ApplicationBuilder().base_url``: PTB appends the token."""
        return f"{self.api_root}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.api_root}/file/bot"

    @property
    def bot_user(self) -> JSON:
        return {"id": self.bot_id, "is_bot": True, "first_name": self.first_name, "username": self.username}

    # ------------------------------------------------------------------ test helpers

    def fail_next(self, method: str, status: int | None = None, *, retry_after: int | None = None,
                  description: str | None = None, migrate_to_chat_id: int | None = None,
                  disconnect: bool = False, delay: float = 0.0, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail. The status defaults to 429 with
        ``retry_after`` (1 s unless given), 400 with ``migrate_to_chat_id``, else 400;
        ``disconnect`` drops the connection instead of answering; ``delay`` waits first."""
        if status is None:
            status = 429 if retry_after is not None else 400
        if status == 429:
            retry_after = 1 if retry_after is None else retry_after
            description = description or f"Too Many Requests: retry after {retry_after}"
        if migrate_to_chat_id is not None:
            description = description or "Bad Request: group chat was upgraded to a supergroup chat"
        failure = Failure(status, description or _DEFAULT_ERRORS.get(status, "Internal Server Error"),
                          retry_after, migrate_to_chat_id, disconnect, delay)
        self._failures.setdefault(method.lower(), deque()).extend([failure] * times)

    def fail_for(self, method: str, seconds: float, status: int = 502, *, description: str | None = None) -> float:
        """Every call of ``method`` fails with ``status`` for the next ``seconds`` (an outage);
        returns the ``time.monotonic()`` at which it ends. Injected ``fail_next`` failures go first."""
        until = time.monotonic() + seconds
        failure = Failure(status, description or _DEFAULT_ERRORS.get(status, "Internal Server Error"))
        self._outages[method.lower()] = (until, failure)
        return until

    def hold(self, method: str) -> None:
        """Calls of ``method`` hang (recorded in ``calls`` on arrival) until ``release``. A held
        call whose client goes away (a killed process) is dropped, as if it never arrived."""
        self._holds.setdefault(method.lower(), asyncio.Event())

    def release(self, method: str) -> None:
        """Held calls of ``method`` go on as normal calls; new ones are no longer held."""
        event = self._holds.pop(method.lower(), None)
        if event is not None:
            event.set()

    def add_file(self, file_id: str, data: bytes, *, file_path: str | None = None,
                 file_unique_id: str | None = None) -> StoredFile:
        """Makes ``file_id`` known to getFile and its bytes downloadable."""
        n = next(self._file_ids)
        stored = StoredFile(file_id, file_unique_id or f"AgAD{n:06d}", file_path or f"documents/file_{n}", data)
        self.files[file_id] = stored
        return stored

    def message(self, chat_id: int, text: str | None = None, *, message_id: int | None = None,
                **options: Any) -> JSON:
        """An Update with a user's message, as Telegram would send it; not queued (``push`` it).
        ``options`` are ``telegram_objects.build_message``'s: user_id, first_name, username,
        chat_type, is_forum, message_thread_id, entities, reply_to_message, photo, document,
        voice, caption, media_group_id, edited, channel_post, new_chat_members, from_bot, ..."""
        mid = message_id if message_id is not None else self._next_message_id(chat_id)
        self._message_ids[chat_id] = max(self._message_ids.get(chat_id, 0), mid)
        kind, msg = build_message(chat_id, mid, text, **options)
        self.chats[chat_id] = msg["chat"]
        return {"update_id": next(self._update_ids), kind: msg}

    def push(self, update: JSON) -> JSON:
        """Queues an update for getUpdates."""
        return self._queue(update, sticky=False)

    def redeliver(self, update: JSON) -> JSON:
        """Queues an already delivered update again, with its update_id: what Telegram does
        after a restart when the offset was not confirmed. Delivered once whatever the offset."""
        return self._queue(update, sticky=True)

    def press(self, chat_id: int | str, message_id: int, data: str, *, user_id: int = 42,
              first_name: str = "Alice", username: str | None = None) -> JSON:
        """Queues a ``callback_query`` update: ``user_id`` pressed the button with ``data`` on the
        bot's message; the update (``redeliver`` it to send the same press again)."""
        msg = self.messages[(chat_id, message_id)]
        if data not in self.buttons(chat_id, message_id):
            raise AssertionError(f"message {message_id} has no button {data!r}")
        user: JSON = {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en",
                      **({"username": username} if username else {})}
        query_id = str(next(self._query_ids))
        self.presses[query_id] = time.monotonic()
        query = {"id": query_id, "from": user, "message": json.loads(json.dumps(msg)),  # as it is now
                 "chat_instance": f"-{abs(hash(str(chat_id))) % 10**18}", "data": data}
        return self.push({"update_id": next(self._update_ids), "callback_query": query})

    def buttons(self, chat_id: int | str, message_id: int) -> list[str]:
        """The ``callback_data`` of the buttons the message shows now, row by row."""
        markup = self.messages[(chat_id, message_id)].get("reply_markup") or {}
        return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row if "callback_data" in b]

    @property
    def pending(self) -> list[JSON]:
        """Updates not yet confirmed by an offset."""
        return [p.update for p in self._pending]

    @property
    def get_updates_calls(self) -> list[Call]:
        return [c for c in self.calls if c.method == "getUpdates"]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 2.0) -> Any:
        """Waits until ``predicate()`` is truthy (checked on every recorded change); returns it."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                if result := predicate():
                    return result
                await changed.wait()

    async def wait_for_sent(self, count: int = 1, timeout: float = 2.0) -> list[Sent]:
        await self.wait_for(lambda: len(self.sent) >= count, timeout)
        return self.sent[:count]

    async def wait_for_calls(self, method: str, count: int = 1, timeout: float = 2.0) -> list[Call]:
        await self.wait_for(lambda: len([c for c in self.calls if c.method == method]) >= count, timeout)
        return [c for c in self.calls if c.method == method][:count]

    async def post_webhook_update(self, update: JSON, *, secret: str | None = _UNSET, timeout: float = 5.0) -> int:
        """POSTs ``update`` to the registered webhook like Telegram does; returns the HTTP status.
        ``secret`` overrides the registered secret token (None sends no header). The https URL
        is reached over plain HTTP, as a reverse proxy terminating TLS would forward it."""
        if self.webhook is None:
            raise RuntimeError("no webhook is set")
        token = self.webhook.secret_token if secret is _UNSET else secret
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            url = self.webhook.url.replace("https://", "http://", 1)
            async with session.post(url, json=update, headers=headers) as response:
                await response.read()
                return response.status

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=60 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        app.router.add_post("/_control/push", self._control_push)
        app.router.add_get("/_control/sent", self._control_sent)
        app.router.add_get("/_control/calls", self._control_calls)
        app.router.add_get("/_control/edits", self._control_edits)
        app.router.add_post("/_control/fail", self._control_fail)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ plumbing

    def _bump(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _record(self, log: list[Any], item: Any) -> None:
        log.append(item)
        self._bump()

    def _queue(self, update: JSON, *, sticky: bool) -> JSON:
        for value in update.values():
            if isinstance(value, dict) and "chat" in value and "message_id" in value:
                chat_id = value["chat"]["id"]
                self.chats.setdefault(chat_id, value["chat"])
                self.messages[(chat_id, value["message_id"])] = value
        self._pending.append(_Pending(update, sticky=sticky))
        self._pending.sort(key=lambda p: p.update_id)
        self._bump()
        return update

    def _next_message_id(self, chat_id: int | str) -> int:
        self._message_ids[chat_id] = self._message_ids.get(chat_id, 0) + 1
        return self._message_ids[chat_id]

    def _chat(self, chat_id: int | str) -> JSON:
        if chat_id not in self.chats:
            self.chats[chat_id] = default_chat(chat_id, len(self.chats))
        return self.chats[chat_id]

    @staticmethod
    def _body(ok: bool, **fields: Any) -> web.Response:
        return web.json_response({"ok": ok, **{k: v for k, v in fields.items() if v is not None}},
                                 status=fields.get("error_code") or 200)

    def _error(self, error: ApiError) -> web.Response:
        return self._body(False, error_code=error.status, description=error.description,
                          parameters=error.parameters)

    async def _read_params(self, request: web.Request) -> tuple[JSON, Files]:
        params: JSON = dict(request.query)
        files: Files = {}
        if request.content_type == "application/json":
            body = await request.json()
            params.update(body if isinstance(body, dict) else {})
        elif request.can_read_body:
            for name, value in (await request.post()).items():
                if isinstance(value, web.FileField):
                    files[name] = value
                else:
                    params[name] = value
        for name, value in params.items():
            if isinstance(value, str) and name not in _TEXT_PARAMS and \
                    (value[:1] in '{["-0123456789' or value in ("true", "false", "null")):
                try:
                    params[name] = json.loads(value)
                except ValueError:
                    pass
        return params, files

    def _check_token(self, token: str) -> ApiError | None:
        if token == self.token:
            return None
        if re.fullmatch(r"\d+:[\w-]+", token):
            return ApiError(401, "Unauthorized")
        return ApiError(404, "Not Found")

    async def _apply_failure(self, request: web.Request, method: str) -> web.Response | None:
        held = self._holds.get(method.lower())
        if held is not None:
            await held.wait()  # cancelled (handler_cancellation) if the client goes away meanwhile
        queue = self._failures.get(method.lower())
        outage = self._outages.get(method.lower())
        if queue:
            failure = queue.popleft()
        elif outage is not None and time.monotonic() < outage[0]:
            failure = outage[1]
        else:
            return None
        if failure.delay:
            await asyncio.sleep(failure.delay)
        if failure.disconnect:
            assert request.transport is not None
            request.transport.abort()  # the client sees a dropped connection, no response
            return web.Response(status=500)
        parameters = {"retry_after": failure.retry_after} if failure.retry_after is not None else \
            {"migrate_to_chat_id": failure.migrate_to_chat_id} if failure.migrate_to_chat_id is not None else None
        return self._error(ApiError(failure.status, failure.description, parameters))

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if (error := self._check_token(request.match_info["token"])) is not None:
            return self._error(error)
        name, handler = self._handlers.get(request.match_info["method"].lower(),
                                           (request.match_info["method"], None))
        params, files = await self._read_params(request)
        self._record(self.calls, Call(name, params, time.monotonic()))
        if (failed := await self._apply_failure(request, name)) is not None:
            return failed
        if handler is None:
            return self._error(ApiError(404, "Not Found"))
        try:
            result = await handler(params, files)
        except ApiError as error:
            return self._error(error)
        if isinstance(result, tuple):  # (result, description)
            return self._body(True, result=result[0], description=result[1])
        return self._body(True, result=result)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if self._check_token(request.match_info["token"]) is not None:
            return self._error(ApiError(404, "Not Found"))
        path = request.match_info["path"]
        self._record(self.calls, Call("downloadFile", {"file_path": path}, time.monotonic()))
        if (failed := await self._apply_failure(request, "downloadFile")) is not None:
            return failed
        stored = next((f for f in self.files.values() if f.file_path == path), None)
        if stored is None:
            return self._error(ApiError(404, "Not Found"))
        return web.Response(body=stored.data, content_type="application/octet-stream")

    # ------------------------------------------------------------------ updates and webhooks

    async def _true(self, params: JSON, files: Files) -> bool:
        return True

    async def _get_me(self, params: JSON, files: Files) -> JSON:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False, "can_connect_to_business": False, "has_main_web_app": False}

    def _allowed_now(self, pending: _Pending) -> bool:
        if self._allowed is None:
            return pending.kind not in _NOT_BY_DEFAULT
        return pending.kind in self._allowed

    async def _get_updates(self, params: JSON, files: Files) -> list[JSON]:
        if self.conflict:
            raise ApiError(409, CONFLICT_POLL)
        self._poll_generation += 1
        generation = self._poll_generation
        self._bump()  # a waiting older poll sees it was superseded
        offset = int(params.get("offset") or 0)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        if "allowed_updates" in params:
            allowed = params["allowed_updates"] or []
            self._allowed = set(allowed) if allowed else None
        if offset < 0:
            self._pending = self._pending[offset:]
        elif offset:
            self._pending = [p for p in self._pending if p.update_id >= offset or (p.sticky and not p.delivered)]
        self._pending = [p for p in self._pending if self._allowed_now(p)]
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self.webhook is not None:
                raise ApiError(409, CONFLICT_WEBHOOK)
            if generation != self._poll_generation or self.conflict:
                raise ApiError(409, CONFLICT_POLL)
            batch = [p for p in self._pending if self._allowed_now(p)][:limit]
            remaining = deadline - asyncio.get_running_loop().time()
            if batch or remaining <= 0:
                break
            changed = self._changed
            try:
                async with asyncio.timeout(remaining):
                    await changed.wait()
            except TimeoutError:
                pass
        now = time.monotonic()
        for p in batch:
            p.delivered = True
            self.delivered.setdefault(p.update_id, now)
        return [p.update for p in batch]

    async def _set_webhook(self, params: JSON, files: Files) -> tuple[bool, str]:
        url = str(params.get("url") or "")
        if not url:
            return await self._delete_webhook(params, files)
        secret = params.get("secret_token")
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise _bad("secret token contains unallowed characters")
        if params.get("drop_pending_updates"):
            self._pending.clear()
        allowed = params.get("allowed_updates")
        if allowed is not None:
            self._allowed = set(allowed) or None
        self.webhook = Webhook(url, secret, tuple(allowed) if allowed is not None else None,
                               int(params.get("max_connections") or 40))
        self._bump()
        return True, "Webhook was set"

    async def _delete_webhook(self, params: JSON, files: Files) -> tuple[bool, str]:
        if params.get("drop_pending_updates"):
            self._pending.clear()
        was_set, self.webhook = self.webhook is not None, None
        self._bump()
        return True, "Webhook was deleted" if was_set else "Webhook is already deleted"

    async def _get_webhook_info(self, params: JSON, files: Files) -> JSON:
        info: JSON = {"url": "", "has_custom_certificate": False, "pending_update_count": len(self._pending)}
        if self.webhook is not None:
            info.update(url=self.webhook.url, max_connections=self.webhook.max_connections, ip_address=self.host)
            if self.webhook.allowed_updates is not None:
                info["allowed_updates"] = list(self.webhook.allowed_updates)
        return info

    # ------------------------------------------------------------------ messages

    def _parse(self, text: str, parse_mode: str | None, entities: list[JSON] | None) -> tuple[str, list[JSON]]:
        mode = (parse_mode or "").lower()
        if mode == "html":
            try:
                plain, found = parse_html(text, strict=self.strict_html)
            except EntityParseError as error:
                raise _bad(f"can't parse entities: {error}") from None
        elif mode in ("", "markdown", "markdownv2"):  # Markdown is not validated
            plain, found = text, list(entities or []) if not mode else []
        else:
            raise _bad("unsupported parse_mode")
        return trim(plain, found)

    @staticmethod
    def _chat_id(params: JSON) -> int | str:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise _bad("chat_id is empty")
        return chat_id

    def _reply_to(self, chat_id: int | str, params: JSON) -> int | None:
        reply = params.get("reply_parameters") or {}
        message_id = reply.get("message_id", params.get("reply_to_message_id"))
        if message_id is None:
            return None
        lenient = reply.get("allow_sending_without_reply", params.get("allow_sending_without_reply"))
        if (chat_id, int(message_id)) not in self.messages and not lenient:
            raise _bad("message to be replied not found")
        return int(message_id)

    def _bot_message(self, chat_id: int | str, params: JSON, reply_to: int | None, **content: Any) -> JSON:
        chat = self._chat(chat_id)
        msg: JSON = {"message_id": self._next_message_id(chat_id), "from": self.bot_user, "chat": chat,
                     "date": int(time.time())}
        thread_id = params.get("message_thread_id")
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            if chat.get("is_forum"):
                msg["is_topic_message"] = True
        if reply_to is not None and (chat_id, reply_to) in self.messages:
            replied = self.messages[(chat_id, reply_to)]
            msg["reply_to_message"] = {k: v for k, v in replied.items() if k != "reply_to_message"}
        msg.update({k: v for k, v in content.items() if v not in (None, [])})
        if _keyboard(params):
            msg["reply_markup"] = params["reply_markup"]
        if params.get("link_preview_options"):
            msg["link_preview_options"] = params["link_preview_options"]
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    def _record_sent(self, method: str, params: JSON, msg: JSON, text: str | None, plain: str | None,
                     reply_to: int | None) -> None:
        self._record(self.sent, Sent(method, self._chat_id(params), text, plain, params.get("parse_mode"),
                                     reply_to, params.get("message_thread_id"), msg["message_id"],
                                     time.monotonic(), params, dict(msg)))  # a snapshot: edits change msg

    async def _send_message(self, params: JSON, files: Files) -> JSON:
        chat_id = self._chat_id(params)
        text = params.get("text")
        if text is None:
            raise _bad("message text is empty")
        plain, entities = self._parse(str(text), params.get("parse_mode"), params.get("entities"))
        if not plain:
            raise _bad("message text is empty")
        if utf16_len(plain) > MAX_TEXT:
            raise _bad("message is too long")
        reply_to = self._reply_to(chat_id, params)
        _check_keyboard(params)
        msg = self._bot_message(chat_id, params, reply_to, text=plain, entities=entities)
        self._record_sent("sendMessage", params, msg, str(text), plain, reply_to)
        return msg

    async def _edit_message_text(self, params: JSON, files: Files) -> JSON | bool:
        text = params.get("text")
        if text is None:
            raise _bad("message text is empty")
        plain, entities = self._parse(str(text), params.get("parse_mode"), params.get("entities"))
        if not plain:
            raise _bad("message text is empty")
        if utf16_len(plain) > MAX_TEXT:
            raise _bad("MESSAGE_TOO_LONG")
        now = time.monotonic()
        if params.get("inline_message_id"):
            self._record(self.edits, Edit(None, None, str(text), plain, params.get("parse_mode"), now,
                                          str(params["inline_message_id"])))
            return True
        chat_id = self._chat_id(params)
        msg = self.messages.get((chat_id, int(params.get("message_id") or 0)))
        if msg is None:
            raise _bad("message to edit not found")
        if msg.get("from", {}).get("id") != self.bot_id:
            raise _bad("message can't be edited")
        if "text" not in msg:
            raise _bad("there is no text in the message to edit")
        _check_keyboard(params)
        markup = params.get("reply_markup") if _keyboard(params) else None
        if msg["text"] == plain and msg.get("entities", []) == entities and msg.get("reply_markup") == markup:
            raise ApiError(400, NOT_MODIFIED)
        msg.update(text=plain, edit_date=int(time.time()))
        for key, value in (("entities", entities), ("reply_markup", markup)):
            if not value:
                msg.pop(key, None)
            else:
                msg[key] = value
        self._record(self.edits, Edit(chat_id, msg["message_id"], str(text), plain, params.get("parse_mode"), now,
                                      reply_markup=markup))
        return msg

    async def _answer_callback_query(self, params: JSON, files: Files) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self.presses or any(a.query_id == query_id for a in self.answers):
            raise ApiError(400, QUERY_TOO_OLD)
        self._record(self.answers, CallbackAnswer(query_id, params.get("text"), bool(params.get("show_alert")),
                                                  time.monotonic()))
        return True

    async def _delete_message(self, params: JSON, files: Files) -> bool:
        if self.messages.pop((self._chat_id(params), int(params.get("message_id") or 0)), None) is None:
            raise _bad("message to delete not found")
        return True

    async def _set_message_reaction(self, params: JSON, files: Files) -> bool:
        key = (self._chat_id(params), int(params.get("message_id") or 0))
        if key not in self.messages:
            raise _bad("message to react not found")
        reaction = params.get("reaction") or []
        if len(reaction) > 1:  # a bot sets one reaction (Premium users more)
            raise _bad("REACTIONS_TOO_MANY")
        if any(r.get("type") not in ("emoji", "custom_emoji", "paid") for r in reaction):
            raise _bad("REACTION_INVALID")
        self.reactions[key] = list(reaction)  # [] takes the bot's reaction away
        return True

    async def _send_chat_action(self, params: JSON, files: Files) -> bool:
        chat_id = self._chat_id(params)
        action = str(params.get("action") or "")
        if action not in _ACTIONS:
            raise _bad("wrong parameter action in request")
        self._record(self.actions, Action(chat_id, action, params.get("message_thread_id"), time.monotonic()))
        return True

    async def _send_document(self, params: JSON, files: Files) -> JSON:
        return await self._send_file("sendDocument", "document", params, files)

    async def _send_photo(self, params: JSON, files: Files) -> JSON:
        return await self._send_file("sendPhoto", "photo", params, files)

    async def _send_voice(self, params: JSON, files: Files) -> JSON:
        return await self._send_file("sendVoice", "voice", params, files)

    async def _send_audio(self, params: JSON, files: Files) -> JSON:
        return await self._send_file("sendAudio", "audio", params, files)

    async def _send_file(self, method: str, kind: str, params: JSON, files: Files) -> JSON:
        chat_id = self._chat_id(params)
        upload = files.get(kind)
        if upload is not None:
            filename, data, mime = upload.filename or kind, upload.file.read(), upload.content_type
        elif isinstance(params.get(kind), str):  # a file_id; URLs would need the internet
            known = self.files.get(params[kind])
            if known is None:
                raise _bad("wrong file identifier/HTTP URL specified")
            filename, data, mime = known.file_path.rsplit("/", 1)[-1], known.data, None
        else:
            raise _bad(f"there is no {kind} in the request")
        if not data:
            raise _bad("file must be non-empty")
        if kind == "photo":
            _check_photo(data)
        caption = params.get("caption")
        plain, entities = self._parse(str(caption), params.get("parse_mode"), params.get("caption_entities")) \
            if caption is not None else (None, [])
        if plain is not None and utf16_len(plain) > MAX_CAPTION:
            raise _bad("message caption is too long")
        reply_to = self._reply_to(chat_id, params)
        n = next(self._file_ids)
        stored = self.add_file(f"{'BQ' if kind == 'document' else 'Ag'}ACAgIAAxkDAAI{n:08d}", data,
                               file_path=f"{kind}s/file_{n}_{filename}")
        meta = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "file_size": len(data)}
        media: Any = [{**meta, "width": 320, "height": 240}] if kind == "photo" else \
            {**meta, "file_name": filename, "mime_type": mime or "application/octet-stream"}
        if kind in ("voice", "audio"):  # Telegram works out the length; a voice note has no file name
            media = {**{k: v for k, v in media.items() if kind == "audio" or k != "file_name"}, "duration": 1}
        msg = self._bot_message(chat_id, params, reply_to, **{kind: media}, caption=plain or None,
                                caption_entities=entities)
        self._record_sent(method, params, msg, caption, plain, reply_to)
        self._record(self.documents, Document(method, chat_id, filename, data, mime, caption, stored.file_id,
                                              msg["message_id"], time.monotonic()))
        return msg

    async def _get_file(self, params: JSON, files: Files) -> JSON:
        stored = self.files.get(str(params.get("file_id") or ""))
        if stored is None:
            raise _bad("invalid file_id")
        if len(stored.data) > MAX_DOWNLOAD:
            raise _bad("file is too big")
        return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                "file_size": len(stored.data), "file_path": stored.file_path}

    # ------------------------------------------------------------------ commands

    def _commands_key(self, params: JSON) -> tuple[str, str]:
        return json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True), \
            str(params.get("language_code") or "")

    def _record_commands(self, method: str, params: JSON, commands: list[JSON]) -> None:
        pairs = tuple((str(c.get("command")), str(c.get("description"))) for c in commands)
        self._record(self.commands_calls, CommandsCall(method, pairs, params.get("scope"),
                                                       str(params.get("language_code") or ""), time.monotonic()))

    async def _set_my_commands(self, params: JSON, files: Files) -> bool:
        commands = params.get("commands") or []
        for command in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", str(command.get("command", ""))):
                raise _bad("BOT_COMMAND_INVALID")
            if not str(command.get("description") or "").strip():
                raise _bad("command description must be non-empty")
        self.commands[self._commands_key(params)] = [{"command": c["command"], "description": c["description"]}
                                                     for c in commands]
        self._record_commands("setMyCommands", params, commands)
        return True

    async def _get_my_commands(self, params: JSON, files: Files) -> list[JSON]:
        commands = self.commands.get(self._commands_key(params), [])
        self._record_commands("getMyCommands", params, commands)
        return commands

    async def _delete_my_commands(self, params: JSON, files: Files) -> bool:
        self.commands.pop(self._commands_key(params), None)
        self._record_commands("deleteMyCommands", params, [])
        return True

    # ------------------------------------------------------------------ control API (standalone use)

    async def _control_push(self, request: web.Request) -> web.Response:
        """Queues an Update, a ``{"chat_id": .., "text": .., ...}`` shortcut (``message``'s
        arguments), or a list of them at once; ``"at"`` is when they were queued."""
        body = await request.json()
        pushed = [self.push(self._control_update(b)) for b in (body if isinstance(body, list) else [body])]
        result = pushed if isinstance(body, list) else pushed[0]
        return web.json_response({"ok": True, "result": result, "at": time.monotonic()})

    async def _control_fail(self, request: web.Request) -> web.Response:
        """``{"method": .., "seconds": .., "status": 502}``: an outage of that method (``fail_for``)."""
        body = await request.json()
        until = self.fail_for(str(body["method"]), float(body["seconds"]), int(body.get("status", 502)))
        return web.json_response({"ok": True, "until": until})

    def _control_update(self, body: JSON) -> JSON:
        if "update_id" in body:
            return body
        names = {"message_id", *inspect.signature(build_message).parameters}
        return self.message(**{k: v for k, v in body.items() if k in names})

    async def _control_sent(self, request: web.Request) -> web.Response:
        records = await self._control_since(request, lambda: self.sent)
        return self._body(True, result=[{k: v for k, v in dataclasses.asdict(s).items() if k != "params"}
                                        for s in records])

    async def _control_edits(self, request: web.Request) -> web.Response:
        records = await self._control_since(request, lambda: self.edits)
        return self._body(True, result=[dataclasses.asdict(e) for e in records])

    async def _control_calls(self, request: web.Request) -> web.Response:
        method = request.query.get("method")
        records = await self._control_since(
            request, lambda: [c for c in self.calls if method is None or c.method == method])
        return self._body(True, result=[dataclasses.asdict(c) for c in records])

    async def _control_since(self, request: web.Request, records: Callable[[], list[Any]]) -> list[Any]:
        """``records()[since:]``; with ``wait=S``, first waits up to S seconds for one to exist
        (a long poll, so a benchmark learns of a record as soon as it is made)."""
        since, wait = int(request.query.get("since", 0)), float(request.query.get("wait", 0))
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await self.wait_for(lambda: len(records()) > since, wait)
        return records()[since:]


def _keyboard(params: JSON) -> bool:
    """Whether ``reply_markup`` holds a keyboard with at least one button."""
    markup = params.get("reply_markup") or {}
    return any(markup.get("inline_keyboard") or ()) or bool(markup.get("keyboard"))


def _check_keyboard(params: JSON) -> None:
    for row in (params.get("reply_markup") or {}).get("inline_keyboard") or ():
        for button in row:
            if not str(button.get("text") or ""):
                raise _bad("BUTTON_TEXT_INVALID")
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                raise _bad("BUTTON_DATA_INVALID")


# ----------------------------------------------------------------------------- standalone


async def _serve(host: str, port: int, token: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with FakeTelegram(host=host, port=port, token=token) as tg:
        print(tg.api_root, flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Telegram Bot API server with a small control API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument("--token", default="123456:TEST-TOKEN")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.token))


if __name__ == "__main__":
    main()


__all__ = ["Action", "ApiError", "Call", "CallbackAnswer", "CommandsCall", "Document", "Edit", "Failure",
           "FakeTelegram", "Sent", "StoredFile", "Webhook"]
