"""One MCP server connection, owned by one task from open to close.

``Supervisor.run`` is that task: it opens the connection (``bot.mcp.connection``), serves it
until it ends, and opens it again after a jittered backoff from 1 s up to 60 s, for ever
(a server that was healthy for a minute starts again from 1 s). Others read its state and
call its tools; only the task sets the state:

- ``connecting``: the first attempt is under way;
- ``ready``: connected, the tools listed;
- ``degraded``: connected, but something is off: a call timed out (the server may hang), a
  ping went unanswered, the transport reported an error, or relisting the tools failed; its
  tools are still offered, and the next success makes it ready again; two pings in a row
  without an answer end the connection;
- ``down``: not connected; the next attempt waits out the backoff. Its tools are not offered.

A state change is logged once (with the error that caused it), never each retry. The tool
list is refreshed when the server says it changed (``notifications/tools/list_changed``); each
listing is handed to ``prepare`` (the hub builds its tools from a new one, in a worker thread)
before it counts as listed and the server as ready. ``last_error`` (what ``/mcp`` and the
dashboard show, the server's last words on its stderr among it) is scrubbed by ``redact``
(the bot's secrets and the server's own ``env`` and ``headers`` values) when it is stored.

``call`` runs a tool from the caller's task with the server's ``call_timeout``; a timeout
and the caller's cancellation (``/stop``) both send the server the protocol's
``notifications/cancelled`` (the SDK does, when a request is abandoned). Connection-level
failures come back as ``ToolError`` sentences the model can read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from bot import observe
from bot.backoff import Backoff
from bot.mcp.config import McpServerConfig
from bot.mcp.connection import Signals, connect, describe_error, last_line, list_tools
from bot.mcp.state import Snapshot, State
from bot.observe import Signal
from bot.tools.base import ToolError

log = logging.getLogger(__name__)

BACKOFF = Backoff(base=1.0, factor=2.0, cap=60.0)
PING_EVERY = 15.0  # seconds between health pings of a quiet connection (HTTP: how a dead server is seen)
PING_TIMEOUT = 10.0
PINGS_MISSED = 2  # unanswered pings in a row that end a connection


class Supervisor:
    def __init__(self, label: str, settings: McpServerConfig, *, cwd: Path | None = None,
                 log_file: Path | None = None,
                 prepare: Callable[[tuple[types.Tool, ...]], Awaitable[None]] | None = None,
                 redact: Callable[[str], str] = str, backoff: Backoff = BACKOFF, once: bool = False,
                 private: tuple[Path, ...] = (), watched: bool = False) -> None:
        self.label = label  # the server's name, and whose instance it is for a per-person one
        self.settings = settings
        self.cwd = cwd
        self.private = private  # sandbox: bwrap: the bot's files covered up where the server could see them
        self.log_file = log_file
        self._prepare = prepare
        self._redact = redact
        self._backoff = backoff
        self._once = once  # list the tools and close (a per-person server's catalog)
        self._state = State.CONNECTING
        self._since = time.time()
        self._watched = watched  # the server's own (not a person's instance): its states are signalled
        if watched:
            observe.signal(Signal.MCP_STATE, name=label, reason=self._state.value)
        self._retry_at: float | None = None
        self.last_error: str | None = None
        self.tools: tuple[types.Tool, ...] = ()
        self.listed = asyncio.Event()  # set once the tools were listed (at least once)
        self._usable = asyncio.Event()
        self._settled = asyncio.Event()  # the first attempt is over, either way
        self._session: ClientSession | None = None
        self._signals = Signals()
        self.in_flight = 0
        self.last_used = time.monotonic()

    # -- what others read ---------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def session(self) -> ClientSession | None:
        """The live session (None while down), for diagnostics and benchmarks: calls go through ``call``."""
        return self._session

    def snapshot(self) -> Snapshot:
        return Snapshot(self._state, len(self.tools), self.last_error, self._since, self._retry_at)

    async def wait_usable(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self._usable.wait()
        except TimeoutError:
            return False
        return True

    async def wait_settled(self, timeout: float) -> None:
        """Until the first attempt is over (ready or not), at most ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        except TimeoutError:
            pass

    # -- the owning task ----------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, reconnect after the backoff; for ever (until cancelled)."""
        retry = 0
        while True:
            opened_at = None
            try:
                async with AsyncExitStack() as stack:
                    self._signals = Signals()
                    opened = await connect(stack, self.settings, self._signals, cwd=self.cwd, log_file=self.log_file,
                                           private=self.private)
                    opened_at = time.monotonic()
                    self._session = opened.session
                    await self._set_tools(opened.tools)
                    self._set(State.READY)
                    if self._once:
                        return
                    await self._serve(opened.session)
                    error = "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a server is a reason to retry it
                error = describe_error(exc)
            finally:
                self._session = None
            tail = last_line(self.log_file)
            self.last_error = self._redact(f"{error}; its last words: {tail}" if tail and tail not in error else error)
            if opened_at is not None and time.monotonic() - opened_at >= self._backoff.cap:
                retry = 0  # it was healthy for a while: start again from the short waits
            retry += 1
            delay = self._backoff.delay(retry)
            self._retry_at = time.time() + delay
            self._set(State.DOWN)
            await asyncio.sleep(delay)
            self._retry_at = None

    async def _serve(self, session: ClientSession) -> None:
        """Until the connection ends: relist on list_changed, ping when quiet, note trouble."""
        signals = self._signals
        missed = 0
        while True:
            try:
                async with asyncio.timeout(PING_EVERY):
                    await signals.wake.wait()
            except TimeoutError:
                signals.trouble = signals.trouble or ""  # quiet for a while: a ping says whether it is alive
            signals.wake.clear()
            if signals.ended:
                return
            if signals.changed:
                signals.changed = False
                try:
                    async with asyncio.timeout(self.settings.connect_timeout):
                        listed = await list_tools(session)
                except (MCPError, TimeoutError, ValidationError, OSError) as exc:
                    self._degrade(f"the tool list changed, but listing it again failed: {describe_error(exc)}")
                else:
                    await self._set_tools(listed)
                    self._recovered()
            if signals.trouble is not None:
                said, signals.trouble = signals.trouble, None
                if said:
                    self._degrade(said)
                try:
                    async with asyncio.timeout(PING_TIMEOUT):
                        await session.send_ping()
                except (MCPError, TimeoutError) as exc:
                    missed += 1
                    self._degrade(f"no answer to a ping: {describe_error(exc)}")
                else:
                    missed = 0
                    self._recovered()
                if missed >= PINGS_MISSED:
                    raise ConnectionError(f"{PINGS_MISSED} pings in a row went unanswered")

    # -- calls, from any task -----------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session = self._session
        if session is None or not self._state.usable:
            why = f": {self.last_error}" if self.last_error else ""
            raise ToolError(f"the MCP server {self.label} is {self._state.value}{why}; try again later")
        timeout = self.settings.call_timeout
        try:
            with self.using():
                result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                self._degrade(f"a call of {tool} timed out after {timeout:g} s")
                raise ToolError(f"{tool} timed out after {timeout:g} s (the server was told to stop it)") from None
            if exc.code == types.CONNECTION_CLOSED:
                raise ToolError(f"the MCP server {self.label} closed the connection during the call "
                                f"(it is being restarted); try again later") from None
            raise ToolError(f"the MCP server {self.label} refused the call: {exc.error.message}") from None
        except (RuntimeError, ValidationError) as exc:  # a result that does not fit the tool's own schema
            raise ToolError(f"the MCP server {self.label} sent a result that is not valid: "
                            f"{describe_error(exc)}") from None
        self._recovered()
        return result

    @contextmanager
    def using(self) -> Iterator[None]:
        """Counts as a use while inside (an idle per-person process is stopped only when none is)."""
        self.in_flight += 1
        self.last_used = time.monotonic()
        try:
            yield
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    # -- state: set by the owning task (and a call's own outcome) ------------------------

    async def _set_tools(self, tools: tuple[types.Tool, ...]) -> None:
        if self._prepare is not None:
            await self._prepare(tools)
        self.tools = tools
        self.listed.set()

    def _degrade(self, why: str) -> None:
        self.last_error = self._redact(why)
        if self._state is State.READY:
            self._set(State.DEGRADED)

    def _recovered(self) -> None:
        if self._state is State.DEGRADED:
            self._set(State.READY)

    def _set(self, state: State) -> None:
        old, self._state = self._state, state
        self._settled.set()  # the first attempt is over, whichever way
        if state.usable:
            self._usable.set()
        else:
            self._usable.clear()
        if old is state:
            return
        self._since = time.time()
        if self._watched:
            observe.signal(Signal.MCP_STATE, name=self.label, reason=state.value)
        if state is State.READY:
            log.info("mcp server %s is ready: %d tools%s", self.label, len(self.tools),
                     " (it had been degraded)" if old is State.DEGRADED else "")
        elif state is State.DOWN:
            log.warning("mcp server %s is down: %s; retrying with backoff (logged again when it is back)",
                        self.label, self.last_error)
        else:
            log.warning("mcp server %s is %s: %s", self.label, state.value, self.last_error)
