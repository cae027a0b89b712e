"""File tools: read, write and list files inside the session's workspace, and nowhere else.

Every path is walked with ``bot.workspace.locate`` (``O_NOFOLLOW`` from the workspace's
descriptor, symlinks followed by hand and only inside); read_file and write_file open the
file through the folder's descriptor, list_files lists the folder it found. ``..`` and
absolute paths outside are refused, over-long paths are errors naming the relative path.
In a group, the persona and rule files are read-only unless the sender is an owner.
The blocking work runs in a thread so a large file never stalls the event loop.
Problems come back as ``ToolError`` sentences.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import secrets
from fnmatch import fnmatch
from pathlib import Path

from bot.tools.base import ToolCategory, ToolContext, ToolError, tool
from bot.workspace import Located, OutsideWorkspaceError, PathTooLongError, locate, open_inside, read_only_for

log = logging.getLogger(__name__)

MAX_READ_BYTES = 10 * 1024 * 1024  # read_file refuses larger files
MAX_READ_CHARS = 40_000  # read_file stops adding lines past this and says where to go on
MAX_LINE_CHARS = 2_000  # longer lines (minified files) are cut
MAX_LIST_ENTRIES = 500
_SNIFF_BYTES = 8192
_SKIP_DIRS = frozenset({".git"})  # listed, never walked into


def _locate(workspace: Path, path: str, *, make_parents: bool = False) -> Located:
    """``bot.workspace.locate`` with its refusals as sentences (never the host path)."""
    try:
        return locate(workspace, path, make_parents=make_parents)
    except (OSError, ValueError) as exc:
        raise _refusal(path, exc, "open") from None


def _refusal(path: str, exc: OSError | ValueError, verb: str) -> ToolError:
    """What the model reads when a path cannot be walked or opened."""
    shown = _shown(path)
    if isinstance(exc, OutsideWorkspaceError):
        return ToolError(f"{shown} is outside the workspace; use a path inside it (relative paths start there)")
    if isinstance(exc, PathTooLongError):
        return ToolError(f"{exc}; use shorter names")
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"no such file: {shown}")
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        return ToolError(f"cannot create {shown}: a part of its path is a file, not a folder")
    if isinstance(exc, ValueError):  # an embedded NUL byte
        return ToolError(f"{shown!r} is not a valid path")
    return ToolError(f"cannot {verb} {shown}: {exc.strerror or 'error'}")


def _shown(path: str) -> str:
    """The model's own path, cut when it is very long (an error must stay readable)."""
    return path if len(path) <= 120 else f"{path[:80]}…{path[-30:]}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


# -- read_file ---------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def read_file(ctx: ToolContext, path: str, offset: int = 0, limit: int = 2000) -> str:
    """Read a text file from the workspace, with line numbers like `cat -n`.

    Args:
        path: File path, relative to the workspace.
        offset: Number of lines to skip from the start (0 reads from the first line).
        limit: Maximum number of lines to return.
    """
    if offset < 0:
        raise ToolError("offset must be 0 or more")
    if limit < 1:
        raise ToolError("limit must be at least 1")
    return await asyncio.to_thread(_read, ctx.workspace, path, offset, limit)


def _read(workspace: Path, path: str, offset: int, limit: int) -> str:
    shown = _shown(path)
    try:
        fd, _ = open_inside(workspace, path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as exc:
        raise _refusal(path, exc, "read") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory; use list_files to see what is in it")
        raise ToolError(f"{shown} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_READ_BYTES:
            raise ToolError(f"{shown} is {_size(info.st_size)}; read_file reads files up to {_size(MAX_READ_BYTES)}")
        try:
            data = handle.read()
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or 'error'}") from None
    if b"\0" in data[:_SNIFF_BYTES]:
        raise ToolError(f"{shown} looks like a binary file ({_size(len(data))}); read_file reads text files only")
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
    log.info("write_file %s (%d bytes) session=%s run=%s", _shown(path), written, ctx.session_key, ctx.run_id)
    return f"{'created' if created else 'wrote'} {_shown(path)} ({written:,} bytes)"


def _write(ctx: ToolContext, path: str, data: bytes) -> tuple[int, bool]:
    shown = _shown(path)
    with _locate(ctx.workspace, path, make_parents=True) as loc:
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
            try:
                os.unlink(tmp, dir_fd=loc.parent)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise ToolError(f"cannot write {shown}: {exc.strerror or 'error'}") from None
            raise
    return len(data), existing is None


# -- list_files --------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def list_files(ctx: ToolContext, path: str = ".", pattern: str | None = None) -> str:
    """List files and folders in the workspace: folders end with `/`, files show their size.

    Args:
        path: Folder to list, relative to the workspace.
        pattern: Optional glob such as `*.md`; when given, subfolders are searched too.
    """
    root = Path(os.path.realpath(ctx.workspace))

    def listing() -> str:
        with _locate(ctx.workspace, path) as loc:  # confined and checked the same way as reads
            folder = root / loc.relative
        return _list(folder, root, _shown(path), pattern)

    return await asyncio.to_thread(listing)


def _list(folder: Path, root: Path, shown: str, pattern: str | None) -> str:
    if not folder.exists():
        raise ToolError(f"no such folder: {shown}")
    if not folder.is_dir():
        raise ToolError(f"{shown} is a file, not a folder; use read_file to read it")
    try:
        entries, complete = _walk(folder, root, pattern) if pattern else _children(folder, root)
    except OSError as exc:
        raise ToolError(f"cannot list {shown}: {exc.strerror or exc}") from None
    if not entries:
        return f"no entries match {pattern!r} in {shown}" if pattern else f"the folder {shown} is empty"
    if not complete:
        entries.append(f"[listing stopped at {MAX_LIST_ENTRIES} entries; narrow it with path or pattern]")
    return "\n".join(entries)


def _children(folder: Path, root: Path) -> tuple[list[str], bool]:
    with os.scandir(folder) as scan:
        items = sorted(scan, key=lambda e: e.name.casefold())
    lines = [_describe(entry, entry.name, root) for entry in items[:MAX_LIST_ENTRIES]]
    return lines, len(items) <= MAX_LIST_ENTRIES


def _walk(folder: Path, root: Path, pattern: str) -> tuple[list[str], bool]:
    """Depth-first in sorted order, never following symlinked folders nor entering ``.git``."""
    lines: list[str] = []

    def visit(directory: str, prefix: str) -> bool:
        try:
            with os.scandir(directory) as scan:
                items = sorted(scan, key=lambda e: e.name.casefold())
        except OSError:
            return True  # unreadable folder: skip it
        for entry in items:
            rel = f"{prefix}{entry.name}"
            if fnmatch(rel if "/" in pattern else entry.name, pattern):
                if len(lines) == MAX_LIST_ENTRIES:
                    return False
                lines.append(_describe(entry, rel, root))
            descend = entry.is_dir(follow_symlinks=False) and entry.name not in _SKIP_DIRS
            if descend and not visit(entry.path, f"{rel}/"):
                return False
        return True

    return lines, visit(str(folder), "")


def _describe(entry: os.DirEntry[str], rel: str, root: Path) -> str:
    if entry.is_symlink():
        target = Path(os.path.realpath(entry.path))
        if target != root and root not in target.parents:
            return f"{rel} -> (outside the workspace)"
        if not target.exists():
            return f"{rel} -> (broken link)"
    try:
        if entry.is_dir():
            return f"{rel}/"
        return f"{rel}  {_size(entry.stat().st_size)}"
    except OSError:
        return f"{rel}  (unreadable)"
