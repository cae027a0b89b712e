"""send_file: a file from the workspace sent to the chat the run serves, as an attachment.

Like ``message``, the tool names no chat: the turn runner's ``FileSender`` sends to the one
the run serves, through the delivery ledger like any answer. The file is opened inside the
workspace without following a link out (``open_inside``), must be a regular file within the
platform's upload limit (checked before anything is sent), and is stored by reference: its
size and SHA-256 now, its bytes read again when it is sent. A file that changed or went
before that is not sent, and the tool says so; so does a send the platform refused. A file
sent once for a message is not sent again for it (the same path and content: a run
repeated after a restart finds it sent). At most ``MAX_PER_RUN`` files per run.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from bot.messages import FileRef
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.workspace import OutsideWorkspaceError, open_inside

log = logging.getLogger(__name__)

QUEUED = "queued"  # FileSender.send_file: stored, not taken by the platform yet
MAX_PER_RUN = 10
MAX_CAPTION = 1000  # characters; Telegram takes 1024 in a caption
_BLOCK = 1 << 20
_RUNS_REMEMBERED = 4096


class FileSender(Protocol):
    def upload_limit(self, run_id: str) -> tuple[str, int]:
        """(the platform's name, the largest file it takes) for the chat run ``run_id`` serves;
        ``LookupError`` when it is not a run that serves a chat."""

    async def send_file(self, run_id: str, ref: FileRef, caption: str, *, photo: bool = False) -> str | None:
        """Send the file to the chat of run ``run_id`` (``caption``: Markdown) and wait for it:
        None once the platform took it (or had it already), ``QUEUED`` when it is still waiting
        for the platform, else why it was not sent. ``photo``: a picture, shown as a photo where
        the platform can (``bot.channels.SendsPhoto``)."""


def send_file_tool(sender: FileSender) -> Tool:
    """The ``send_file`` tool sending through ``sender``."""
    sent: OrderedDict[str, int] = OrderedDict()  # run id -> files sent

    @tool(category=ToolCategory.NETWORK, name="send_file")
    async def send_file(ctx: ToolContext, path: str, caption: str = "") -> str:
        """Send a file from the workspace to this chat, as an attachment the person can open or
        save (a CSV, a PDF, an image you made). Write the file first (write_file), then send it.

        Args:
            path: The file's path, relative to the workspace.
            caption: A short text shown with the file (optional, Markdown).
        """
        try:
            platform, limit = sender.upload_limit(ctx.run_id)
        except LookupError:
            raise ToolError("send_file is not available here (only the run that serves a chat can send it files)") \
                from None
        if len(caption) > MAX_CAPTION:
            raise ToolError(f"the caption is {len(caption):,} characters; keep it under {MAX_CAPTION:,}")
        count = sent.get(ctx.run_id, 0)
        if count >= MAX_PER_RUN:
            raise ToolError(f"already sent {MAX_PER_RUN} files in this request")
        ref = await asyncio.to_thread(reference, ctx.workspace, path, limit, platform)
        problem = await sender.send_file(ctx.run_id, ref, caption.strip())
        if problem == QUEUED:
            return (f"{ref.path} is queued: the platform has not taken it yet, and it will be sent when it does "
                    "(do not send it again)")
        if problem is not None:
            raise ToolError(f"{ref.path} was not sent: {problem}")
        sent[ctx.run_id] = count + 1
        sent.move_to_end(ctx.run_id)
        while len(sent) > _RUNS_REMEMBERED:
            sent.popitem(last=False)
        log.info("send_file %s (%d bytes) session=%s run=%s", ref.path, ref.size, ctx.session_key, ctx.run_id)
        return f"sent {ref.path} ({_size(ref.size)}) to the chat"

    return send_file


def reference(workspace: Path, path: str, limit: int, platform: str) -> FileRef:
    """A regular file of the workspace, opened without following a link out, as a ``FileRef``
    (blocking); a ``ToolError`` when it cannot be sent."""
    try:
        fd, relative = open_inside(workspace, path, os.O_RDONLY | os.O_NONBLOCK)
    except OutsideWorkspaceError:
        raise ToolError(f"{path} is outside the workspace; only files in the workspace can be sent") from None
    except FileNotFoundError:
        raise ToolError(f"no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot open {path}: {getattr(exc, 'strerror', None) or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{path} is not a regular file")
        if info.st_size > limit:
            raise ToolError(f"{relative} is {_size(info.st_size)}; {platform} takes files up to {_size(limit)}")
        if info.st_size == 0:
            raise ToolError(f"{relative} is empty; there is nothing to send")
        digest, size = hashlib.sha256(), 0
        while block := handle.read(_BLOCK):
            digest.update(block)
            size += len(block)
            if size > limit:
                raise ToolError(f"{relative} grew past {_size(limit)} while it was read")
    return FileRef(str(workspace), relative, size, digest.hexdigest())


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1048576:.1f} MB"
