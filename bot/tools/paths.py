"""What the workspace tools share: confinement (``confined``, ``open_regular``) and the sentences
its refusals become, sizes in words, a text sniff, and the sorted walk that never leaves the workspace.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bot.tools.base import ToolContext, ToolError
from bot.workspace import OutsideWorkspaceError, PathTooLongError, open_inside, resolve_inside

SNIFF_BYTES = 8192
SKIP_DIRS = frozenset({".git"})  # listed, never walked into


def confined(ctx: ToolContext, path: str) -> Path:
    """``path`` resolved inside the session's workspace, or a ``ToolError`` the model reads."""
    try:
        return resolve_inside(ctx.workspace, path)
    except (OSError, ValueError) as exc:
        raise refusal(path, exc, "use") from None


def short_path(path: str) -> str:
    """The model's own path, cut when it is very long (an error must stay readable)."""
    return path if len(path) <= 120 else f"{path[:80]}…{path[-30:]}"


def refusal(path: str, exc: OSError | ValueError, verb: str) -> ToolError:
    """What the model reads when a path cannot be walked or opened (never the host path)."""
    shown = short_path(path)
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


def open_regular(path: Path | str, root: Path) -> BinaryIO:
    """Open a (resolved) path of the workspace ``root`` (real) for reading only if it is still a
    regular file, walked again from the workspace's descriptor (``bot.workspace.open_inside``):
    a link swapped in after the path was checked is not followed out, and a FIFO does not hang
    the thread. Raises ``OSError`` (``IsADirectoryError`` for anything not regular;
    ``PermissionError`` when the walk leads outside)."""
    try:
        relative = Path(path).relative_to(root)
    except ValueError:
        raise OutsideWorkspaceError(f"{path} is outside the workspace") from None
    try:
        fd, _ = open_inside(root, str(relative), os.O_RDONLY | os.O_NONBLOCK)
    except PathTooLongError as exc:
        raise OSError(36, str(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def workspace_root(ctx: ToolContext) -> Path:
    return Path(os.path.realpath(ctx.workspace))


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def looks_binary(head: bytes) -> bool:
    """A NUL byte in the first ``SNIFF_BYTES`` means binary (what git and grep do)."""
    return b"\0" in head[:SNIFF_BYTES]


def within(root: Path, path: Path | str) -> bool:
    """Does ``path``, links followed, lead to ``root`` (real) or below it?"""
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def inside(root: Path, entry: os.DirEntry[str]) -> bool:
    """Does ``entry`` (maybe a symlink) lead to the workspace or below it?"""
    return not entry.is_symlink() or within(root, entry.path)


def walk(folder: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(path relative to folder, entry)`` depth-first in case-insensitive name order.

    Symlinked folders are yielded but never entered, ``.git`` is yielded but never
    entered, unreadable folders are skipped. Links are not checked here: see ``inside``."""

    def visit(directory: str, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
        try:
            with os.scandir(directory) as scan:
                items = sorted(scan, key=lambda e: e.name.casefold())
        except OSError:
            return
        for entry in items:
            rel = f"{prefix}{entry.name}"
            yield rel, entry
            try:
                descend = entry.is_dir(follow_symlinks=False) and entry.name not in SKIP_DIRS
            except OSError:
                descend = False
            if descend:
                yield from visit(entry.path, f"{rel}/")

    return visit(str(folder), "")
