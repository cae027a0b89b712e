"""The context files: the workspace's files the system prompt shows (``CONTEXT_FILES``),
each capped, all together capped, read through the fence and cached while unchanged.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.workspace.fence import READ_FLAGS, open_inside
from bot.workspace.layout import CONTEXT_FILES

log = logging.getLogger(__name__)

PER_FILE_CAP = 20_000
TOTAL_CAP = 60_000
_MAX_FULL_READ = 2 * 1024 * 1024  # bigger files: read the head, count the rest in bytes
_CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class ContextFile:
    """A workspace file as the system prompt shows it; ``truncated`` when it was cut,
    in which case ``content`` ends with a visible marker."""

    name: str
    content: str
    truncated: bool = False


def truncation_marker(name: str, more: int, unit: str = "characters") -> str:
    return f"[… truncated: {more:,} more {unit} in {name}]"


@dataclass(frozen=True, slots=True)
class _Entry:
    key: tuple[int, int, int, int, int]  # mtime_ns, ctime_ns, size, inode, per-file cap
    file: ContextFile | None  # None: empty file, skipped
    kept: int  # characters of the file's text in ``file`` (marker not counted)
    more: int  # what is left out: characters, or bytes when ``unit`` says so
    unit: str


class _ReadCache:
    """(path, mtime_ns, ctime_ns, size, inode) -> the capped file, LRU; thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, key: tuple[int, ...]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or entry.key != key:
                return None
            self._entries.move_to_end(path)
            return entry

    def put(self, path: str, entry: _Entry) -> None:
        with self._lock:
            self._entries[path] = entry
            self._entries.move_to_end(path)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_cache = _ReadCache(_CACHE_SIZE)


def _open_context(workspace: Path, name: str, follow_links: bool) -> tuple[str, os.stat_result, int | None] | None:
    """``(cache path, stat, open fd or None)`` of a context file that is a regular file inside
    the workspace, or None. The common case costs one ``lstat`` and opens nothing (a cached
    read needs no fd). A link is walked inside the workspace (``open_inside``) and opened at
    once, so what is read is what was checked; with ``follow_links`` false it is skipped."""
    path = os.path.join(workspace, name)
    try:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode):
            return (path, st, None) if stat.S_ISREG(st.st_mode) else None
        if not follow_links:
            log.info("context file %s skipped: a link, and this workspace's prompt follows none", path)
            return None
        fd, relative = open_inside(workspace, name, READ_FLAGS)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # OutsideWorkspaceError included
        log.warning("context file %s skipped: %s", path, exc)
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return os.path.join(workspace, relative), st, fd


def _read(fd: int, name: str, cap: int, key: tuple[int, int, int, int, int]) -> _Entry:
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return _Entry(key, None, 0, 0, "characters")
        size = key[2]
        if size <= _MAX_FULL_READ:
            text, more_bytes = fh.read().decode("utf-8-sig", errors="replace"), 0
        else:
            head = fh.read(cap * 4)
            text, more_bytes = head.decode("utf-8-sig", errors="ignore")[:cap], size - len(head)
    if not text.strip():
        return _Entry(key, None, 0, 0, "characters")
    body = text[:cap]
    more, unit = (more_bytes, "bytes") if more_bytes else (len(text) - len(body), "characters")
    content = f"{body}\n\n{truncation_marker(name, more, unit)}" if more else body
    return _Entry(key, ContextFile(name, content, bool(more)), len(body), more, unit)


def _read_context(workspace: Path, name: str, cap: int, follow_links: bool) -> _Entry | None:
    found = _open_context(workspace, name, follow_links)
    if found is None:
        return None
    real, st, fd = found
    key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, cap)
    entry = _cache.get(real, key)
    if entry is not None:
        if fd is not None:
            os.close(fd)
        return entry
    try:
        if fd is None:  # a plain name in the workspace's own folder: O_NOFOLLOW, and the same file
            fd = os.open(real, READ_FLAGS | os.O_NOFOLLOW)
            if os.fstat(fd).st_ino != st.st_ino:
                os.close(fd)
                return None  # swapped since the lstat: the next run reads it
        entry = _read(fd, name, cap, key)
    except OSError as exc:
        log.warning("context file %s unreadable: %s", real, exc)
        return None
    _cache.put(real, entry)
    return entry


def load_context_files(
    path: Path,
    names: Sequence[str] = CONTEXT_FILES,
    *,
    per_file_cap: int = PER_FILE_CAP,
    total_cap: int = TOTAL_CAP,
    follow_links: bool = True,
) -> list[ContextFile]:
    """The workspace's context files that exist and are not blank, in the order of ``names``.

    Each is cut at ``per_file_cap`` characters and all together at ``total_cap``, with a
    visible marker where text was left out. Blocking but cheap: an unchanged file costs
    one ``lstat`` (reads are cached by path, mtime, ctime, size and inode); callers on
    an event loop may still wrap it in ``asyncio.to_thread``. Symlinks that lead outside
    the workspace, and anything that is not a regular file, are skipped; with
    ``follow_links`` false (a group's prompt, whose files only owners may write) every link is.
    """
    files: list[ContextFile] = []
    budget = total_cap
    for name in names:
        if not name or name in (".", "..") or "/" in name or os.sep in name:
            raise ValueError(f"context file names are plain file names, not {name!r}")
        entry = _read_context(path, name, per_file_cap, follow_links)
        if entry is None or entry.file is None:
            continue
        if entry.kept <= budget:
            files.append(entry.file)
            budget -= entry.kept
            continue
        body, cut = entry.file.content[:budget], entry.file.content[budget : entry.kept]
        more = entry.more + (len(cut) if entry.unit == "characters" else len(cut.encode()))
        marker = truncation_marker(name, more, entry.unit)
        files.append(ContextFile(name, f"{body}\n\n{marker}" if body else marker, True))
        budget = 0
    return files
