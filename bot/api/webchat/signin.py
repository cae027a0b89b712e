"""Signing in to the web chat: a one-time link (``/signin?t=...``, confirmed by a POST so that a
link preview never uses it up), or a code sent to the person's linked chat account.

A code works once, for ``CODE_TTL`` seconds; only its hash is stored. A person is sent at most
one code per ``CODE_EVERY`` seconds (nobody can flood someone's chat with codes), and wrong codes
count as failed logins (``LoginLimiter``: per address and per name). The answer to a request
is the same whether the name is known or not.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from bot.api.people import person_named
from bot.api.webchat import invites
from bot.api.webchat.page import signin_page
from bot.messages import ChatType, Target
from bot.web.auth import LoginLimiter

log = logging.getLogger(__name__)

CODE_TTL = 600.0
CODE_EVERY = 60.0  # seconds between two codes sent to one person
SENT = "If that name is known here, a code was sent to your chat app."


class SignIn:
    def __init__(self, store: Any, links: Mapping[str, Sequence[str]], *, running: Callable[[], Any],
                 say: Callable[[str, str, Target, str], Awaitable[None]],
                 signed_in: Callable[[str], web.Response], clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._links, self._running, self._say = store, links, running, say
        self._signed_in, self._clock = signed_in, clock
        self._limiter = LoginLimiter()
        self._sent: OrderedDict[str, float] = OrderedDict()  # person -> when their last code was sent

    def route(self, app: web.Application) -> None:
        app.router.add_get("/signin", self._form)
        app.router.add_post("/signin", self._link)
        app.router.add_post("/code/send", self._send_code)
        app.router.add_post("/code", self._code)

    async def _form(self, request: web.Request) -> web.StreamResponse:
        return html(signin_page(token=request.query.get("t", "")))

    async def _link(self, request: web.Request) -> web.StreamResponse:
        token = (await request.post()).get("token")
        person = await self._store.write(invites.take(token)) if isinstance(token, str) and token else None
        if person is None:
            return html(signin_page("This sign-in link was used already or has expired; ask for a new one."), 403)
        return self._signed_in(person)

    async def _send_code(self, request: web.Request) -> web.StreamResponse:
        name = str((await request.post()).get("person", "")).strip()
        person = person_named(name, self._links) if name else None
        channels = self._running()
        account = next(((p, u) for p, u in person.accounts if p in channels and p not in ("api", "webchat")), None) \
            if person is not None else None
        if person is None or account is None:
            return html(signin_page(SENT))
        now = self._clock()
        if now - self._sent.get(person.name, -CODE_EVERY) < CODE_EVERY:
            log.info("webchat: a code for %s asked again within %g s: not sent", person.name, CODE_EVERY)
            return html(signin_page(SENT))
        self._sent[person.name] = now
        self._sent.move_to_end(person.name)
        while len(self._sent) > 10_000:
            self._sent.popitem(last=False)
        code = f"{secrets.randbelow(10**6):06d}"
        await self._store.write(invites.add(f"{person.name}\0{code}", person.name, CODE_TTL))
        await self._say(account[0], f"webchat-code-{secrets.token_hex(6)}", Target(account[1], ChatType.DM),
                        f"Your web chat sign-in code is {code} (it works once, for 10 minutes). "
                        "If you did not ask for it, ignore this message.")
        return html(signin_page(SENT))

    async def _code(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name, code = str(form.get("person", "")).strip(), str(form.get("code", "")).strip()
        address = request.remote or ""
        if (wait := self._limiter.attempt(address, name)) is not None:
            return html(signin_page(f"Too many attempts; try again in {wait:.0f} s."), 429)
        person = await self._store.write(invites.take(f"{name}\0{code}")) if name and code else None
        if person is None:
            return html(signin_page("That code is not right, or it has expired."), 403)
        self._limiter.succeeded(address, name)
        return self._signed_in(person)


def html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html")
