"""The dashboard's pages, actions and live feed: each handler reads what its page shows and
hands it to a page function (``bot.dashboard.pages``); each action checks the role, does
one thing, records who did it, and sends the browser back to the page with one line saying
what happened. The server (``bot.dashboard.server``) has already checked the login, the
origin and the CSRF token."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from aiohttp import web

from bot.dashboard.live import LiveBoard, LiveRun
from bot.dashboard.pages.conversations import conversation_page, sessions_page
from bot.dashboard.pages.layout import Viewer
from bot.dashboard.pages.live import ChannelState, live_page, status_payload
from bot.dashboard.pages.operations import OperationsView, operations_page
from bot.dashboard.pages.people import DAYS, PersonUsage, people_page
from bot.dashboard.pages.runs import run_page, runs_page
from bot.dashboard.reads import Reads
from bot.dashboard.sources import Bot, JobControl, Operations, PeoplePolicy
from bot.messages import Answer
from bot.tasks import OwnedTasks
from bot.web.auth import Login, Sessions
from bot.web.html import clip

log = logging.getLogger(__name__)

LOGIN = web.RequestKey("login", Login)  # set by the server's guard on every request past it
FORM = web.RequestKey("form", dict[str, str])  # a POST's text fields, once its CSRF token was checked

SESSIONS_SHOWN = 100
TRACES_SHOWN = 100
BEHIND_AFTER = 60.0  # seconds an answer may wait before its channel shows as behind
FEED_WAIT = 1.0  # seconds the feed waits for a change before it looks again anyway
STATUS_EVERY = 5.0  # seconds between two updates of channels and deliveries on the live page
KEEPALIVE = 15.0  # seconds of silence after which the feed sends a comment (proxies close idle streams)


class Server(Protocol):
    """What the views need of the web server that serves them (``bot.dashboard.server.Dashboard``)."""

    @property
    def board(self) -> LiveBoard | None:
        """The runs going on now (None: no bot in this process)."""
        ...

    @property
    def cookie(self) -> str:
        """The name of the login's cookie."""
        ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def closing(self) -> asyncio.Event:
        """Set when the server stops (the live feed ends)."""
        ...

    async def audit(self, request: web.Request, action: str, target: str, outcome: str, *, user: str | None = None,
                    role: str | None = None) -> None:
        """Write an action down in the audit trail (and the log)."""
        ...


class Views:
    def __init__(self, server: Server, store: Reads, bot: Bot | None, operations: Operations,
                 people: PeoplePolicy, redact: Callable[[str], str], tasks: OwnedTasks) -> None:
        self._server = server
        self._store = store
        self._bot = bot
        self._ops = operations
        self._people = people
        self._redact = redact
        self._tasks = tasks
        self._channels: dict[str, ChannelState] = {}

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/", self.home)
        r.add_get("/live", self.live)
        r.add_get("/live/events", self.feed)
        r.add_post("/live/stop", self.stop)
        r.add_get("/conversations", self.conversations)
        r.add_get(r"/conversations/{id:\d{1,18}}", self.conversation)
        r.add_get("/runs", self.runs)
        r.add_get("/runs/{run_id}", self.run)
        r.add_get("/people", self.people)
        r.add_post("/people/approve", self.approve)
        r.add_post("/people/deny", self.deny)
        r.add_get("/operations", self.operations)
        r.add_post("/operations/pause", self.pause)
        r.add_post("/operations/resume", self.resume)
        r.add_post("/operations/cancel", self.cancel)

    def start(self) -> None:
        """Watch the bot's channels: a channel whose ``wait_closed`` returns or raises has ended."""
        if self._bot is None:
            return
        for name, channel in self._bot.channels.items():
            self._channels[name] = ChannelState(name, "running")
            self._tasks.spawn(self._watch(name, channel.wait_closed()), f"dashboard watches {name}")

    async def _watch(self, name: str, closed: Any) -> None:
        try:
            await closed
        except Exception as exc:  # noqa: BLE001 - the channel's own failure, shown as its state
            self._channels[name] = ChannelState(name, "failed", clip(str(exc), 200))
        else:
            self._channels[name] = ChannelState(name, "stopped")

    # -- pages --------------------------------------------------------------------------

    async def home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther("/live")

    async def live(self, request: web.Request) -> web.StreamResponse:
        owed = await self._store.undelivered()
        now = time.time()
        runs = await self._server.board.everywhere() if self._server.board is not None else None
        return _page(live_page(self._viewer(request), runs=runs, channels=self._channel_states(owed, now), owed=owed,
                               now=now))

    async def conversations(self, request: web.Request) -> web.StreamResponse:
        search = request.query.get("q", "")[:200]
        found = await self._store.sessions(search, SESSIONS_SHOWN)
        return _page(sessions_page(self._viewer(request), found, search, limit=SESSIONS_SHOWN))

    async def conversation(self, request: web.Request) -> web.StreamResponse:
        log_ = await self._store.session_log(int(request.match_info["id"]))
        if log_ is None:
            raise web.HTTPNotFound(text="No such conversation.\n")
        return _page(conversation_page(self._viewer(request), log_, self._redact))

    async def runs(self, request: web.Request) -> web.StreamResponse:
        session = request.query.get("session", "")[:500]
        failed = request.query.get("status") == "failed"
        traces = await self._store.traces(session or None, TRACES_SHOWN * (5 if failed else 1))
        if failed:
            traces = [t for t in traces if t.status == "failed"][-TRACES_SHOWN:]
        return _page(runs_page(self._viewer(request), traces, session=session, failed_only=failed))

    async def run(self, request: web.Request) -> web.StreamResponse:
        trace = await self._store.trace(request.match_info["run_id"][:200])
        if trace is None:
            raise web.HTTPNotFound(text="No such run (a run shows here once it has ended).\n")
        return _page(run_page(self._viewer(request), trace))

    async def people(self, request: web.Request) -> web.StreamResponse:
        now = time.time()
        today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        since = today - (DAYS - 1) * 86400
        report = await self._store.daily_usage(since)
        pending = await self._store.pending_pairings(now)
        approved = await self._store.approved_senders()
        owners = set(self._people.owners)
        tokens: dict[str, list[int]] = {}
        cost: dict[str, list[float]] = {}
        for day in report.days:
            i = int(round((day.day - since) / 86400))
            if 0 <= i < DAYS:
                tokens.setdefault(day.person, [0] * DAYS)[i] += day.tokens
                cost.setdefault(day.person, [0.0] * DAYS)[i] += day.cost
        usage = sorted((PersonUsage(p, report.names.get(p, ""), p in owners, tuple(tokens[p]), tuple(cost[p]))
                        for p in tokens), key=lambda u: (-u.today_tokens, -sum(u.daily_tokens), u.person))
        return _page(people_page(self._viewer(request), usage=usage, limits=self._people.limits,
                                 owners=self._people.owners, pending=pending, approved=approved, now=now))

    async def operations(self, request: web.Request) -> web.StreamResponse:
        ops = self._ops
        view = OperationsView(
            mcp=list(ops.mcp.mcp_status()) if ops.mcp is not None else None,
            jobs=list(await ops.jobs.jobs()) if ops.jobs is not None else None,
            jobs_controllable=isinstance(ops.jobs, JobControl),
            approvals=list(await ops.approvals.pending_approvals()) if ops.approvals is not None else None,
            failures=await self._store.failures(20), actions=await self._store.actions(50))
        return _page(operations_page(self._viewer(request), view, time.time()))

    # -- the live feed ------------------------------------------------------------------

    async def feed(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events for the live page: ``runs`` when the runs change (at most every
        ``live.INTERVAL``), ``status`` every few seconds; it ends with the login or the server."""
        board = self._server.board
        if board is None:
            return web.Response(status=404, text="No bot runs in this process.\n")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        cookie = request.cookies.get(self._server.cookie)
        sent: list[LiveRun] | None = None
        last_status = last_write = 0.0
        async with board.watching():
            changed = True
            while not self._server.closing.is_set() and self._server.sessions.get(cookie) is not None:
                now = time.monotonic()
                rows = await board.everywhere()
                if changed or rows != sent:  # (another instance's runs change without an event here)
                    await _event(response, "runs", board.payload(rows))
                    sent, last_write = rows, now
                if now - last_status >= STATUS_EVERY:
                    owed = await self._store.undelivered()
                    wall = time.time()
                    await _event(response, "status", json.dumps(status_payload(self._channel_states(owed, wall), owed,
                                                                               wall)))
                    last_status = last_write = now
                elif now - last_write >= KEEPALIVE:
                    await response.write(b": keepalive\n\n")
                    last_write = now
                changed = await board.changed(FEED_WAIT)
        return response

    # -- actions ------------------------------------------------------------------------

    async def stop(self, request: web.Request) -> web.StreamResponse:
        run_id = _form(request, "run")
        if (refused := await self._refuse(request, "stop", run_id, "stop runs")) is not None:
            return refused
        if self._bot is None:
            await self._server.audit(request, "stop", run_id, "refused: no bot in this process")
            return _text(409, "No bot runs in this process: stop runs from the dashboard `chatgate run` serves.")
        instance = _form(request, "instance")[:100]
        elsewhere = self._server.board.elsewhere if self._server.board is not None else None
        if elsewhere is not None and instance and instance != elsewhere.instance:  # the instance running it stops it
            stopped = await elsewhere.stop_there(instance, run_id)
            target = f"{run_id} on {instance}"
        else:
            stopped, target = await self._bot.stop_run(run_id), run_id
        await self._server.audit(request, "stop", target, "done" if stopped else "not found" if stopped is False
                                 else "no answer")
        _login(request).flash = ("Stopped the run; its chat was told “Stopped.”" if stopped else
                                 "That run had already ended." if stopped is False else
                                 f"Instance {instance} did not answer; the run may still go on.")
        raise web.HTTPSeeOther("/live")

    async def approve(self, request: web.Request) -> web.StreamResponse:
        return await self._pairing(request, "approve")

    async def deny(self, request: web.Request) -> web.StreamResponse:
        return await self._pairing(request, "deny")

    async def _pairing(self, request: web.Request, what: str) -> web.StreamResponse:
        code = _form(request, "code")
        if (refused := await self._refuse(request, what, code, f"{what} pairing requests")) is not None:
            return refused
        decide = self._store.approve_pairing if what == "approve" else self._store.deny_pairing
        found = await decide(code, time.time())
        who = f"{found.platform}:{found.user_id}" if found else code
        await self._server.audit(request, what, who, "done" if found else "not found")
        if found is None:
            _login(request).flash = "That request is gone (approved, denied or expired)."
        elif what == "approve":
            _login(request).flash = f"Approved {found.user_name or who} ({who}): they can talk to the bot now."
        else:
            _login(request).flash = f"Denied the request of {found.user_name or who} ({who})."
        raise web.HTTPSeeOther("/people")

    async def pause(self, request: web.Request) -> web.StreamResponse:
        return await self._job(request, "pause")

    async def resume(self, request: web.Request) -> web.StreamResponse:
        return await self._job(request, "resume")

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        return await self._job(request, "cancel")

    async def _job(self, request: web.Request, what: str) -> web.StreamResponse:
        job_id = _form(request, "job")
        if (refused := await self._refuse(request, what, job_id, f"{what} jobs")) is not None:
            return refused
        control = self._ops.jobs
        if not isinstance(control, JobControl):
            await self._server.audit(request, what, job_id, "refused: jobs cannot be changed here")
            return _text(409, "Scheduled jobs cannot be changed from this dashboard.")
        if what == "cancel":
            done = await control.cancel_job(job_id)
        else:
            done = await control.set_paused(job_id, what == "pause")
        await self._server.audit(request, what, job_id, "done" if done else "not found")
        past = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}[what]
        _login(request).flash = f"{past} job {job_id}." if done else "That job is gone."
        raise web.HTTPSeeOther("/operations")

    async def _refuse(self, request: web.Request, action: str, target: str, what: str) -> web.Response | None:
        """403 for a viewer (the page shows them no button; this is a forged or stale form)."""
        if _login(request).role.may_act:
            return None
        await self._server.audit(request, action, target, "refused: viewer")
        return _text(403, f"Refused: viewers cannot {what}.")

    # -- shared -------------------------------------------------------------------------

    def _viewer(self, request: web.Request) -> Viewer:
        login = _login(request)
        return Viewer(login.user, str(login.role), login.role.may_act, login.csrf, login.take_flash())

    def _channel_states(self, owed: Sequence[Answer], now: float) -> list[ChannelState] | None:
        if self._bot is None:
            return None
        states = []
        for name in self._bot.channels:
            state = self._channels.get(name, ChannelState(name, "running"))
            late = sum(1 for a in owed if a.platform == name and now - a.created_at > BEHIND_AFTER)
            if state.state == "running" and late:
                state = ChannelState(name, "sending fails",
                                     f"{late} answer{'s' if late != 1 else ''} waiting over {BEHIND_AFTER:.0f} s")
            states.append(state)
        return states


def _login(request: web.Request) -> Login:
    return request[LOGIN]


def _form(request: web.Request, name: str) -> str:
    return request[FORM].get(name, "")[:200]


def _page(body: str) -> web.Response:
    return web.Response(text=body, content_type="text/html")


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


async def _event(response: web.StreamResponse, name: str, data: str) -> None:
    await response.write(f"event: {name}\ndata: {data}\n\n".encode())

