"""Opening one MCP connection with the SDK: the transport, the ``ClientSession``, the handshake.

``connect`` enters everything on the caller's ``AsyncExitStack``, so the task that opens a
connection is the one that closes it (the SDK's transports hold anyio task groups: they must
be left by the task that entered them). It returns the session with the server's tools
listed, and reports through ``Signals`` what the supervisor waits on: the connection ended
(the transport's stream ran out: the process exited, the HTTP session is gone), the server
said its tool list changed (``notifications/tools/list_changed``), or the transport hit
trouble (an exception on the stream).

stdio: the server's environment is what its ``env`` names over the SDK's minimal default
(``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``) and ``LANG``: never the bot's
own variables (tokens, keys). Its stderr goes to a log file of its own (``log``), whose last
line says why a server that died at start did. HTTP: the client sends the configured
headers, takes no proxy from the environment and, unless ``allow_private``, connects only to
public addresses (``bot.mcp.http``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream
from typing_extensions import Self

from bot.mcp.config import McpServerConfig

log = logging.getLogger(__name__)

CLIENT = types.Implementation(name="chatgate", version="0.1.0")
MAX_PAGES = 50  # of one tools/list walk
MAX_LOG = 1024 * 1024  # bytes of a server's stderr log before it is moved aside (at its next start)


@dataclass(slots=True)
class Signals:
    """What a connection tells its supervisor; each sets ``wake``."""

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    changed: bool = False
    trouble: str | None = None

    def end(self) -> None:
        self.ended = True
        self.wake.set()

    async def on_message(self, message: IncomingMessage) -> None:
        """The session's ``message_handler``: runs in the session's task group, so it only notes."""
        if isinstance(message, Exception):
            self.trouble = f"{type(message).__name__}: {message}"
            self.wake.set()
        elif isinstance(message, types.ToolListChangedNotification):
            self.changed = True
            self.wake.set()


class Watched:
    """The transport's read stream, telling ``on_end`` when it runs out (EOF: the server is gone)."""

    def __init__(self, inner: ReadStream[Any], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:  # the HTTP transport's per-message context, passed on
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


@dataclass(frozen=True, slots=True)
class Opened:
    session: ClientSession
    tools: tuple[types.Tool, ...]


def stdio_environment(settings: McpServerConfig) -> dict[str, str]:
    """What ``env`` sets over the SDK's default environment (see the module doc)."""
    return {"LANG": os.environ.get("LANG") or "C.UTF-8", **settings.env}


def _stderr(log_file: Path | None, stack: AsyncExitStack) -> TextIO:
    """Where the server's stderr goes: its log, moved to ``<log>.1`` past ``MAX_LOG`` bytes
    (one older file kept), so a chatty server never fills the disk."""
    if log_file is None:
        sink = open(os.devnull, "w")  # noqa: SIM115 - closed by the stack
    else:
        log_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            if log_file.stat().st_size > MAX_LOG:
                log_file.replace(log_file.with_name(log_file.name + ".1"))
        except FileNotFoundError:
            pass
        sink = open(log_file, "a", encoding="utf-8")  # noqa: SIM115 - closed by the stack
    stack.callback(sink.close)
    return sink


def last_line(log_file: Path | None, limit: int = 300) -> str:
    """The last non-blank line a server wrote to its stderr log ("" when none)."""
    if log_file is None:
        return ""
    try:
        with open(log_file, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def launch(settings: McpServerConfig, cwd: Path | None, log_file: Path | None,
           private: tuple[Path, ...] = ()) -> tuple[str, list[str], Path | None]:
    """The program, its arguments and its working folder for a stdio server: its own command,
    or (``sandbox: bwrap``) bubblewrap running it in the exec sandbox's world, with its folder
    (the person's workspace, ``cwd``, else ``<log>.home``) at ``/workspace`` as its home, the
    folders of ``sandbox_paths`` read-only, ``private`` covered up. Its environment stays the
    process's (never on a command line: ``env`` holds secrets)."""
    assert settings.command is not None
    folder = cwd if cwd is not None else settings.cwd
    if settings.sandbox == "none":
        return settings.command, list(settings.args), folder
    from bot.tools.sandbox import ExecSettings, bwrap_arguments

    if folder is None:
        if log_file is None:
            raise OSError("a sandboxed server needs a cwd")
        folder = log_file.with_name(log_file.name.removesuffix(".log") + ".home")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    options = bwrap_arguments(folder, ExecSettings(network=settings.network, private=private),
                              also=settings.sandbox_paths, environment=False)
    return "bwrap", [*options, "--", settings.command, *settings.args], None


async def connect(stack: AsyncExitStack, settings: McpServerConfig, signals: Signals, *,
                  cwd: Path | None = None, log_file: Path | None = None, private: tuple[Path, ...] = ()) -> Opened:
    """Open, shake hands and list the tools, within ``connect_timeout``."""
    if settings.command is not None:
        command, args, folder = launch(settings, cwd, log_file, private)
        params = StdioServerParameters(command=command, args=args, env=stdio_environment(settings), cwd=folder)
        read, write = await stack.enter_async_context(stdio_client(params, errlog=_stderr(log_file, stack)))
    else:
        from bot.mcp.http import http_client

        assert settings.url is not None
        client = await stack.enter_async_context(
            http_client(settings.headers, connect_timeout=settings.connect_timeout,
                        read_timeout=max(300.0, settings.call_timeout + 30.0), allow_private=settings.allow_private))
        read, write = await stack.enter_async_context(streamable_http_client(settings.url, http_client=client))
    session = await stack.enter_async_context(
        ClientSession(Watched(read, signals.end), write, message_handler=signals.on_message, client_info=CLIENT))
    with anyio.fail_after(settings.connect_timeout):
        await session.initialize()
        tools = await list_tools(session)
    return Opened(session, tools)


async def list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    """Every tool the server lists, all pages."""
    found: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        found += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(found)


def describe_error(exc: BaseException) -> str:
    """One line for the status and the log; a group's first real error."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    if isinstance(exc, TimeoutError):
        return "no answer to the handshake within connect_timeout"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

