"""The fence around a workspace: every path is walked inside it, and no link leads out.

``locate`` walks a path one component at a time from the workspace's directory
descriptor, opening each folder with ``O_NOFOLLOW`` and following a symlink only by reading
it and walking its target the same way, inside the workspace. What it returns is an open
descriptor of the folder that holds the file and the file's name in there, so the tool
opens the file with ``dir_fd`` and ``O_NOFOLLOW`` too: nothing is checked by path and then
used by path, and a symlink swapped in between the check and the use (by a command
running in the same workspace) makes the open fail instead of leading outside.
``resolve_inside`` remains for code that only needs a path (listing, seeding).

Every host-side access to a workspace goes through that walk too (``open_inside``,
``open_folder_inside``, ``create_inside``, ``read_inside``): saving uploads, reading images
back, seeding, the context files. A sandboxed command can plant links anywhere in its
workspace; the bot, which runs outside the sandbox, never follows one out.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path


class OutsideWorkspaceError(PermissionError):
    """A path that resolves (symlinks followed) to somewhere outside the workspace."""


class PathTooLongError(ValueError):
    """A path, or one of its names, longer than the filesystem takes; ``relative`` is safe to show."""

    def __init__(self, relative: str) -> None:
        self.relative = relative
        shown = relative if len(relative) <= 80 else f"{relative[:60]}…{relative[-16:]}"
        super().__init__(f"the path {shown} is too long")


MAX_LINKS = 40  # symlinks followed in one walk, as the kernel allows
NAME_MAX = 255  # bytes in one name
PATH_MAX = 4096  # bytes in a whole path
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)  # a folder, never a link
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)  # a FIFO does not block the open
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)  # a new file, no link


@dataclass(frozen=True, slots=True)
class Located:
    """Where a path inside a workspace leads: ``name`` in the open folder ``parent``.

    ``relative`` is the POSIX path from the workspace (``.`` for the workspace itself,
    whose ``parent`` is the workspace and ``name`` ``.``). Close it (it is a context manager)."""

    parent: int
    name: str
    relative: str

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.parent)


def locate(workspace: Path, user_path: str, *, make_parents: bool = False) -> Located:
    """Walk ``user_path`` (relative to the workspace, or absolute inside it) with ``O_NOFOLLOW``.

    Symlinks are followed by hand, each target walked inside the workspace; ``..`` above the
    workspace, an absolute path elsewhere and a link leading out raise ``OutsideWorkspaceError``.
    A missing folder raises ``FileNotFoundError`` unless ``make_parents`` (then it is created,
    0700); a file where a folder should be, ``NotADirectoryError``; a name or path the
    filesystem cannot take, ``PathTooLongError``. No error text holds the host path."""
    if "\0" in user_path:
        raise ValueError("a path cannot contain a NUL byte")
    root = os.path.realpath(workspace)
    parts = _relative_parts(root, str(Path(workspace)), user_path)
    joined = "/".join(part for part in parts if part)
    if len(joined.encode("utf-8", "surrogateescape")) > PATH_MAX or any(
            len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in parts):
        raise PathTooLongError(joined)  # before anything is created
    stack = [os.open(root, DIR_FLAGS)]
    names: list[str] = []
    links = 0
    try:
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) == 1:
                    raise OutsideWorkspaceError(f"{user_path!r} is outside the workspace")
                os.close(stack.pop())
                names.pop()
                continue
            relative = "/".join([*names, part])
            if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX or len(relative.encode()) > PATH_MAX:
                raise PathTooLongError("/".join([*names, part, *parts]))
            try:
                info = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not parts:  # the last name may be missing: the caller creates it, or says so
                    return Located(stack.pop(), part, relative)
                if not make_parents:
                    raise FileNotFoundError(2, "No such file or directory") from None
                os.mkdir(part, 0o700, dir_fd=stack[-1])
                info = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(40, "Too many levels of symbolic links")
                target = os.readlink(part, dir_fd=stack[-1])
                if target.startswith("/"):
                    inner = _relative_parts(root, root, target, user_path)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    parts = inner + parts
                else:
                    parts = target.split("/") + parts
                continue
            if not parts:
                return Located(stack.pop(), part, relative)
            if not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(20, "Not a directory")
            stack.append(os.open(part, DIR_FLAGS, dir_fd=stack[-1]))  # ELOOP if swapped for a link
            names.append(part)
        if len(stack) == 1:
            return Located(stack.pop(), ".", ".")
        name = names[-1]
        os.close(stack.pop())  # the folder itself: hand out its parent and its name
        return Located(stack.pop(), name, "/".join(names))
    except OSError as exc:
        if exc.errno == 36:  # ENAMETOOLONG from the filesystem itself
            raise PathTooLongError(user_path.lstrip("/")) from None
        raise
    finally:
        for fd in stack:
            os.close(fd)


def open_inside(workspace: Path, user_path: str, flags: int = os.O_RDONLY, mode: int = 0o644, *,
                make_parents: bool = False) -> tuple[int, str]:
    """``locate`` then open the file through its folder's descriptor with ``O_NOFOLLOW``:
    ``(fd, relative path)``. Raises what ``locate`` raises, and ``OSError`` from the open
    (``ELOOP`` when a link was swapped in after the walk). The caller closes the fd."""
    with locate(workspace, user_path, make_parents=make_parents) as loc:
        fd = os.open(loc.name, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=loc.parent)
    return fd, loc.relative


def open_folder_inside(workspace: Path, user_path: str, *, create: bool = False) -> tuple[int, str]:
    """``locate`` then open the folder itself with ``O_NOFOLLOW``: ``(directory fd, relative
    path)``; with ``create`` it (and its parents) are made, 0700, when missing. A link that
    leads out raises ``OutsideWorkspaceError``, one swapped in after the walk ``ELOOP``, a
    file in its place ``NotADirectoryError``. The caller closes the fd."""
    with locate(workspace, user_path, make_parents=create) as loc:
        try:
            fd = os.open(loc.name, DIR_FLAGS, dir_fd=loc.parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
                os.mkdir(loc.name, 0o700, dir_fd=loc.parent)
            fd = os.open(loc.name, DIR_FLAGS, dir_fd=loc.parent)
    return fd, loc.relative


def create_inside(workspace: Path, user_path: str, mode: int = 0o644) -> tuple[int, str]:
    """Create a new file for writing: its folder walked (and made) like ``open_folder_inside``,
    the file itself created with ``O_EXCL | O_NOFOLLOW``, so an existing file or link of that
    name raises ``FileExistsError`` and nothing is ever overwritten. ``(fd, relative path)``."""
    folder, _, name = user_path.strip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise IsADirectoryError(f"{user_path} names a folder, not a file")
    dir_fd, relative = open_folder_inside(workspace, folder or ".", create=True)
    try:
        fd = os.open(name, CREATE_FLAGS, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return fd, name if relative == "." else f"{relative}/{name}"


def read_inside(workspace: Path, user_path: str, max_bytes: int) -> bytes:
    """The bytes of a regular file inside the workspace, walked like ``locate`` (a FIFO or
    a folder raises ``IsADirectoryError``, a file over ``max_bytes`` ``ValueError``)."""
    fd, _ = open_inside(workspace, user_path, READ_FLAGS)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise IsADirectoryError(f"{user_path} is not a regular file")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{user_path} is larger than {max_bytes} bytes")
    return data


def _relative_parts(root: str, given: str, path: str, shown: str | None = None) -> list[str]:
    """The components of ``path`` relative to the workspace (``root`` real, ``given`` as configured)."""
    path = os.path.expanduser(path) if path.startswith("~") else path
    if not path.startswith("/"):
        return path.split("/")
    for base in (root, given):
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return path[len(base):].split("/")
    raise OutsideWorkspaceError(f"{shown or path!r} is outside the workspace")


def resolve_inside(workspace: Path, user_path: str) -> Path:
    """``user_path`` (relative to the workspace, or absolute) resolved with symlinks
    followed; refused when the result is not the workspace or below it."""
    root = Path(os.path.realpath(workspace))
    candidate = Path(user_path).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and root not in resolved.parents:
        raise OutsideWorkspaceError(f"{user_path!r} is outside the workspace")
    return resolved
