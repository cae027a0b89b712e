"""File tools: read, write and edit files inside the session's workspace, and nowhere else.
read_file reads PDF and Word documents as text too (``documents``).

Every path is walked with ``bot.workspace.locate`` (``O_NOFOLLOW`` from the workspace's
descriptor, symlinks followed by hand and only inside) and the file opened through its
folder's descriptor: ``..`` and absolute paths outside are refused, over-long paths are
errors naming the relative path. In a group, the persona and rule files are read-only unless
the sender is an owner. The blocking work runs in a thread so a large file never stalls the
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import re
import secrets
import stat
import weakref
from pathlib import Path
from typing import BinaryIO

from bot.tools import documents
from bot.tools.base import ToolCategory, ToolContext, ToolError, tool
from bot.tools.paths import SNIFF_BYTES, human_size, looks_binary, open_regular, refusal, short_path
from bot.workspace import locate, open_inside, read_only_for

log = logging.getLogger(__name__)

MAX_READ_BYTES = 10 * 1024 * 1024  # read_file refuses larger files
MAX_READ_CHARS = 40_000  # read_file stops adding lines past this and says where to go on
MAX_LINE_CHARS = 2_000  # longer lines (minified files) are cut
_LINE_BYTES = 2 * 1024 * 1024  # a big file's line is read up to this, the rest skipped


_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()
_MAX_LINES_NAMED = 10  # edit_file names at most this many matching lines


def _lock(target: Path) -> asyncio.Lock:
    """Edits of one file are serialised: two edits in one step never lose each other's change."""
    return _locks.setdefault(target, asyncio.Lock())


# -- read_file ---------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def read_file(ctx: ToolContext, path: str, offset: int = 0, limit: int = 2000, pages: str = "") -> str:
    """Read a file from the workspace as text, with line numbers like `cat -n`: text files, and
    PDF and Word (.docx) documents (their text; a PDF a few pages at a time).

    Args:
        path: File path, relative to the workspace.
        offset: Number of lines to skip from the start (0 reads from the first line).
        limit: Maximum number of lines to return.
        pages: PDF only: the pages to read, such as 3, 3-5 or 3- (up to 50 at a time; default the first 50).
    """
    if offset < 0:
        raise ToolError("offset must be 0 or more")
    if limit < 1:
        raise ToolError("limit must be at least 1")
    return await asyncio.to_thread(_read, ctx.workspace, path, offset, limit, pages)


def _open(workspace: Path, path: str) -> tuple[BinaryIO, int]:
    """A regular file of the workspace opened for reading without following a link, and its size."""
    shown = short_path(path)
    try:
        fd, _ = open_inside(workspace, path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as exc:
        raise refusal(path, exc, "read") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory; use list_files to see what is in it")
        raise ToolError(f"{shown} is not a regular file")
    return os.fdopen(fd, "rb"), info.st_size


def _load(workspace: Path, path: str) -> bytes:
    """The whole bytes of a regular file of at most ``MAX_READ_BYTES`` (for edit_file)."""
    shown = short_path(path)
    handle, size = _open(workspace, path)
    with handle:
        if size > MAX_READ_BYTES:
            raise ToolError(f"{shown} is {human_size(size)}; edit_file edits files up to {human_size(MAX_READ_BYTES)} "
                            "(write_file can replace it whole)")
        try:
            return handle.read()
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or 'error'}") from None


def _read(workspace: Path, path: str, offset: int, limit: int, pages: str) -> str:
    shown = short_path(path)
    handle, size = _open(workspace, path)
    with handle:
        try:
            kind = documents.kind_of(handle.read(8), path)
            handle.seek(0)
            if kind is not None:
                return _read_document(handle, kind, shown, size, offset, limit, pages)
            if pages:
                raise ToolError(f"pages is for PDF documents; {shown} is read by lines (offset, limit)")
            if size > MAX_READ_BYTES:  # stream to the lines asked for, never holding it whole
                return _read_big(handle, shown, size, offset, limit)
            data = handle.read()
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or 'error'}") from None
    return numbered(data, shown, offset, limit)


def _read_document(handle: BinaryIO, kind: documents.Kind, shown: str, size: int, offset: int, limit: int,
                   pages: str) -> str:
    """A PDF's pages or a Word document's text, numbered and paged like a text file."""
    if size > documents.MAX_DOCUMENT_BYTES:
        raise ToolError(f"{shown} is {human_size(size)}; documents up to "
                        f"{human_size(documents.MAX_DOCUMENT_BYTES)} can be read")
    if kind == "docx" and pages:
        raise ToolError(f"pages is for PDF documents; {shown} is read by lines (offset, limit)")
    text, where = documents.read_text(kind, handle.read(), shown, pages)
    if not text.strip():
        return f"{shown} ({where}) has no text to read (it may be scanned images)."
    lines = numbered(text.encode("utf-8"), shown, offset, limit).rsplit("\n", 1)
    return f"{lines[0]}\n{lines[1][:-1]}; {where}]"


def _read_big(handle: BinaryIO, shown: str, size: int, offset: int, limit: int) -> str:
    if looks_binary(handle.read(SNIFF_BYTES)):
        raise ToolError(f"{shown} looks like a binary file ({human_size(size)}); read_file reads text files only")
    handle.seek(0)
    out: list[str] = []
    chars, number, more = 0, 0, False
    while raw := handle.readline(_LINE_BYTES):
        long = len(raw) == _LINE_BYTES and not raw.endswith(b"\n")
        while long and (rest := handle.readline(_LINE_BYTES)) and not rest.endswith(b"\n"):
            pass  # skip the rest of a very long line
        number += 1
        if number <= offset:
            continue
        line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        if long or len(line) > MAX_LINE_CHARS:
            how_long = f"over {human_size(_LINE_BYTES)}" if long else f"{len(line):,} characters"
            line = f"{line[:MAX_LINE_CHARS]}… [line cut, {how_long}]"
        if (out and chars + len(line) > MAX_READ_CHARS) or len(out) == limit:
            more = True
            break
        out.append(f"{number:6}\t{line}")
        chars += len(line) + 8
    if not out:
        raise ToolError(f"offset {offset} is past the end: {shown} has {number} lines")
    first, last = offset + 1, offset + len(out)
    size_text = human_size(size)
    if not more:
        return "\n".join([*out, f"[{shown}: lines {first}-{last}, the end of the file ({size_text})]"])
    return "\n".join([*out, f"[{shown}: lines {first}-{last} of a {size_text} file; continue with offset={last}]"])


def read_range(target: Path, shown: str, offset: int, limit: int, root: Path) -> str:
    """Blocking: numbered lines of ``target`` (a path of the workspace ``root`` already confined,
    by memory_get), opened as ``open_regular`` does; a ``ToolError`` when it cannot be read."""
    try:
        with open_regular(target, root) as handle:
            info = os.fstat(handle.fileno())
            if info.st_size > MAX_READ_BYTES:
                raise ToolError(f"{shown} is {human_size(info.st_size)}; files up to {human_size(MAX_READ_BYTES)} "
                                "can be read")
            data = handle.read()
    except FileNotFoundError:
        raise ToolError(f"no such file: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
    return numbered(data, shown, offset, limit)


def numbered(data: bytes, shown: str, offset: int, limit: int) -> str:
    """The lines ``offset+1 .. offset+limit`` of a text file's bytes, numbered like `cat -n`,
    capped, with a closing note saying what was shown and where to go on."""
    if looks_binary(data):
        raise ToolError(f"{shown} looks like a binary file ({human_size(len(data))}); read_file reads text files only")
    if not data:
        return f"{shown} is empty."
    lines = data.decode("utf-8", errors="replace").splitlines()
    total = len(lines)
    if offset >= total:
        raise ToolError(f"offset {offset} is past the end: {shown} has {total} lines")
    out: list[str] = []
    chars = 0
    end = min(total, offset + limit)
    for number in range(offset, end):
        line = lines[number]
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… [line cut, {len(line):,} characters]"
        if out and chars + len(line) > MAX_READ_CHARS:
            end = number
            break
        out.append(f"{number + 1:6}\t{line}")
        chars += len(line) + 8
    if offset == 0 and end == total:
        out.append(f"[{shown}: {total} lines]")
    else:
        more = f"; continue with offset={end}" if end < total else ""
        out.append(f"[{shown}: lines {offset + 1}-{end} of {total}{more}]")
    return "\n".join(out)


# -- write_file --------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file in the workspace, replacing it if it exists; missing folders are created.

    Args:
        path: File path, relative to the workspace.
        content: The complete new content of the file.
    """
    written, created = await asyncio.to_thread(_write, ctx, path, content.encode("utf-8"))
    log.info("write_file %s (%d bytes) session=%s run=%s", short_path(path), written, ctx.session_key, ctx.run_id)
    return f"{'created' if created else 'wrote'} {short_path(path)} ({written:,} bytes)"


def _write(ctx: ToolContext, path: str, data: bytes) -> tuple[int, bool]:
    shown = short_path(path)
    if read_only_for(_as_written(ctx.workspace, path), chat_type=ctx.chat_type, sender_is_owner=ctx.sender_is_owner):
        raise ToolError(f"{shown} is read-only in this group: only an owner may change it; "
                        "tell the user so instead of working around it")  # before any folder is made for it
    try:
        located = locate(ctx.workspace, path, make_parents=True)
    except (OSError, ValueError) as exc:
        raise refusal(path, exc, "open") from None
    with located as loc:
        if read_only_for(loc.relative, chat_type=ctx.chat_type, sender_is_owner=ctx.sender_is_owner):
            raise ToolError(f"{loc.relative} is read-only in this group: only an owner may change it; "
                            "tell the user so instead of working around it")
        try:
            existing = os.stat(loc.name, dir_fd=loc.parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            raise ToolError(f"cannot write {shown}: {exc.strerror or 'error'}") from None
        if loc.name == "." or (existing is not None and stat.S_ISDIR(existing)):
            raise ToolError(f"{shown} is a directory; give a file path")
        tmp = f".chatgate-{secrets.token_hex(6)}.tmp"  # short: the name itself may be NAME_MAX long
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=loc.parent)
        except OSError as exc:
            raise ToolError(f"cannot write {shown}: {exc.strerror or 'error'}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                os.fchmod(handle.fileno(), stat.S_IMODE(existing) if existing is not None else 0o644)
            os.replace(tmp, loc.name, src_dir_fd=loc.parent, dst_dir_fd=loc.parent)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=loc.parent)
            if isinstance(exc, OSError):
                raise ToolError(f"cannot write {shown}: {exc.strerror or 'error'}") from None
            raise
    return len(data), existing is None


def _as_written(workspace: Path, path: str) -> str:
    """``path`` as a path from the workspace, by its text alone (``..`` applied, no link followed):
    what ``read_only_for`` is asked before the walk, which may create folders, and after it."""
    for root in (str(workspace).rstrip("/"), os.path.realpath(workspace)):
        if path.startswith(f"{root}/"):
            path = path[len(root) + 1:]
            break
    return posixpath.normpath(path)


# -- edit_file ---------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
    """Replace exact text in a workspace file. old_text must match the file exactly (spaces and
    line breaks included) and only once, unless replace_all is true; copy it from read_file's
    output without the line numbers, with enough surrounding lines to be unique.

    Args:
        path: File path, relative to the workspace.
        old_text: The exact text to replace.
        new_text: The text to put in its place (may be empty to delete).
        replace_all: Replace every occurrence instead of requiring exactly one.
    """
    if not old_text:
        raise ToolError("old_text is empty; give the exact text to replace (write_file creates or overwrites files)")
    if old_text == new_text:
        raise ToolError("old_text and new_text are the same; nothing to change")
    async with _lock(Path(ctx.workspace) / path):
        summary = await asyncio.to_thread(_edit, ctx, path, old_text, new_text, replace_all)
    log.info("edit_file %s session=%s run=%s", short_path(path), ctx.session_key, ctx.run_id)
    return summary


def _edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool) -> str:
    shown = short_path(path)
    # surrogateescape: bytes that are not UTF-8 come back out unchanged
    text = _load(ctx.workspace, path).decode("utf-8", errors="surrogateescape")
    starts = _occurrences(text, old)
    if not starts and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # the file has Windows line ends
        starts = _occurrences(text, old)
    if not starts:
        raise ToolError(_no_match(text, old, shown))
    lines = [text.count("\n", 0, i) + 1 for i in starts]
    if len(starts) > 1 and not replace_all:
        raise ToolError(f"old_text matches {len(starts)} places in {shown} ({_name_lines(lines)}); "
                        "include more surrounding text so it matches exactly one, or set replace_all=true")
    edited = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    _write(ctx, path, edited.encode("utf-8", errors="surrogateescape"))
    if len(starts) == 1:
        return f"edited {shown}: replaced 1 occurrence at line {lines[0]}"
    return f"edited {shown}: replaced {len(starts)} occurrences ({_name_lines(lines)})"


def _occurrences(text: str, old: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences, the way ``str.replace`` sees them."""
    found, at = [], text.find(old)
    while at != -1:
        found.append(at)
        at = text.find(old, at + len(old))
    return found


def _name_lines(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:_MAX_LINES_NAMED]))
    more = f" and {len(lines) - _MAX_LINES_NAMED} more" if len(lines) > _MAX_LINES_NAMED else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"


def _no_match(text: str, old: str, shown: str) -> str:
    """Found 0: say so, and why it may have missed when that can be seen."""
    hint = "copy the text exactly as it is in the file (read_file shows it)"
    if _LINE_NUMBER.match(old):
        hint = "leave out the line numbers that read_file puts before each line"
    else:
        loose = _squeeze(old)
        matching = [n for n, line in enumerate(text.splitlines(), 1) if loose and loose in _squeeze(line)]
        if matching:
            hint = (f"text like it, with different spaces or indentation, is at {_name_lines(matching)}; "
                    "copy it exactly as read_file shows it")
        elif loose and loose in _squeeze(text):
            hint = "the text is there with different spaces, indentation or line breaks; copy it exactly"
    return f"old_text was not found in {shown} (0 matches); {hint}"


_LINE_NUMBER = re.compile(r"^\s*\d+\t")
_SPACES = re.compile(r"\s+")


def _squeeze(text: str) -> str:
    return _SPACES.sub(" ", text).strip()
