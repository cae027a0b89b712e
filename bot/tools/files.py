"""File tools: read, write and edit files inside the session's workspace, and nowhere else.

Every path goes through ``bot.tools.paths.confined`` (symlinks followed, ``..`` and
absolute paths outside refused). The blocking work runs in a thread so a large file
never stalls the event loop. Problems come back as ``ToolError`` sentences. Writes and
edits of one file are serialised (a lock per real path), so two edits in one step of
the model cannot lose each other's change. Listing and searching live in ``find``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import tempfile
import weakref
from pathlib import Path

from bot.tools.base import ToolCategory, ToolContext, ToolError, tool
from bot.tools.paths import SNIFF_BYTES, confined, human_size, looks_binary, open_regular

log = logging.getLogger(__name__)

MAX_READ_BYTES = 10 * 1024 * 1024  # read_file and edit_file refuse larger files
MAX_READ_CHARS = 40_000  # read_file stops adding lines past this and says where to go on
MAX_LINE_CHARS = 2_000  # longer lines (minified files) are cut
_LINE_BYTES = 2 * 1024 * 1024  # a big file's line is read up to this, the rest skipped
_MAX_LINES_NAMED = 10  # edit_file names at most this many matching lines

_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


def _lock(target: Path) -> asyncio.Lock:
    lock = _locks.get(target)
    if lock is None:
        lock = _locks[target] = asyncio.Lock()
    return lock


# -- read_file ---------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def read_file(ctx: ToolContext, path: str, offset: int = 0, limit: int = 2000) -> str:
    """Read a text file from the workspace, with line numbers like `cat -n`. Long files come in
    parts: the last line says which lines were shown and the offset to continue from.

    Args:
        path: File path, relative to the workspace.
        offset: Number of lines to skip from the start (0 reads from the first line).
        limit: Maximum number of lines to return.
    """
    if offset < 0:
        raise ToolError("offset must be 0 or more")
    if limit < 1:
        raise ToolError("limit must be at least 1")
    return await asyncio.to_thread(_read, confined(ctx, path), path, offset, limit)


def _stat_file(target: Path, shown: str) -> os.stat_result:
    try:
        info = target.stat()
    except FileNotFoundError:
        raise ToolError(f"no such file: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory; use list_files to see what is in it")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file")
    return info


def _load(target: Path, shown: str) -> bytes:
    """The bytes of a regular text file of at most ``MAX_READ_BYTES``, or a ``ToolError``."""
    info = _stat_file(target, shown)
    if info.st_size > MAX_READ_BYTES:
        raise ToolError(f"{shown} is {human_size(info.st_size)}; edit_file edits files up to "
                        f"{human_size(MAX_READ_BYTES)} (write_file can replace it whole)")
    try:
        with open_regular(target) as handle:
            data = handle.read()
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if looks_binary(data):
        raise ToolError(f"{shown} looks like a binary file ({human_size(len(data))}); read_file reads text files only")
    return data


def read_range(target: Path, shown: str, offset: int, limit: int) -> str:
    """Blocking: the numbered lines ``offset+1 .. offset+limit`` of ``target`` (already confined),
    capped, with the closing note; a ``ToolError`` when it cannot be read. For other tools."""
    return _read(target, shown, offset, limit)


def _read(target: Path, shown: str, offset: int, limit: int) -> str:
    size = _stat_file(target, shown).st_size
    if size > MAX_READ_BYTES:
        return _read_big(target, shown, size, offset, limit)
    data = _load(target, shown)
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
            line = _cut(line, f"{len(line):,} characters")
        if out and chars + len(line) > MAX_READ_CHARS:
            end = number
            break
        out.append(_numbered(number + 1, line))
        chars += len(line) + 8
    if offset == 0 and end == total:
        out.append(f"[{shown}: {total} lines]")
    else:
        more = f"; continue with offset={end}" if end < total else ""
        out.append(f"[{shown}: lines {offset + 1}-{end} of {total}{more}]")
    return "\n".join(out)


def _read_big(target: Path, shown: str, size: int, offset: int, limit: int) -> str:
    """A file over ``MAX_READ_BYTES``: stream to the lines asked for, never holding it whole."""
    out: list[str] = []
    chars, number, more = 0, 0, False
    try:
        with open_regular(target) as handle:
            if looks_binary(handle.read(SNIFF_BYTES)):
                raise ToolError(f"{shown} looks like a binary file ({human_size(size)}); read_file reads text files only")
            handle.seek(0)
            while raw := handle.readline(_LINE_BYTES):
                long = len(raw) == _LINE_BYTES and not raw.endswith(b"\n")
                while long and (rest := handle.readline(_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # skip the rest of a very long line
                number += 1
                if number <= offset:
                    continue
                line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
                if long or len(line) > MAX_LINE_CHARS:
                    line = _cut(line, f"over {human_size(_LINE_BYTES)}" if long else f"{len(line):,} characters")
                if (out and chars + len(line) > MAX_READ_CHARS) or len(out) == limit:
                    more = True
                    break
                out.append(_numbered(number, line))
                chars += len(line) + 8
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if not out:
        raise ToolError(f"offset {offset} is past the end: {shown} has {number} lines")
    first, last = offset + 1, offset + len(out)
    if not more:
        return "\n".join([*out, f"[{shown}: lines {first}-{last}, the end of the file ({human_size(size)})]"])
    return "\n".join([*out, f"[{shown}: lines {first}-{last} of a {human_size(size)} file; "
                             f"continue with offset={last}]"])


def _numbered(number: int, line: str) -> str:
    return f"{number:6}\t{line}"


def _cut(line: str, how_long: str) -> str:
    return f"{line[:MAX_LINE_CHARS]}… [line cut, {how_long}]"


# -- write_file --------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file in the workspace, replacing it if it exists; missing folders are created.

    Args:
        path: File path, relative to the workspace.
        content: The complete new content of the file.
    """
    target = confined(ctx, path)
    async with _lock(target):
        written, created = await asyncio.to_thread(_write, target, path, content.encode("utf-8"))
    log.info("write_file %s (%d bytes) session=%s run=%s", path, written, ctx.session_key, ctx.run_id)
    return f"{'created' if created else 'wrote'} {path} ({written:,} bytes)"


def _write(target: Path, shown: str, data: bytes) -> tuple[int, bool]:
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        existing = target.stat().st_mode if target.exists() else None
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create {shown}: a part of its path is a file, not a folder") from None
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(existing) if existing is not None else 0o644)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None
        raise
    return len(data), existing is None


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
    target = confined(ctx, path)
    async with _lock(target):
        summary = await asyncio.to_thread(_edit, target, path, old_text, new_text, replace_all)
    log.info("edit_file %s session=%s run=%s", path, ctx.session_key, ctx.run_id)
    return summary


def _edit(target: Path, shown: str, old: str, new: str, replace_all: bool) -> str:
    # surrogateescape: bytes that are not UTF-8 come back out unchanged
    text = _load(target, shown).decode("utf-8", errors="surrogateescape")
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
    _write(target, shown, edited.encode("utf-8", errors="surrogateescape"))
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
