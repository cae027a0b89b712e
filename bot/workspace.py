"""Per-user workspaces: where a session's files live, and the fence around them.

The fence: ``locate`` walks a path one component at a time from the workspace's directory
descriptor, opening each folder with ``O_NOFOLLOW`` and following a symlink only by reading
it and walking its target the same way, inside the workspace. What it returns is an open
descriptor of the folder that holds the file and the file's name in there, so the tool
opens the file with ``dir_fd`` and ``O_NOFOLLOW`` too: nothing is checked by path and then
used by path, and a symlink swapped in between the check and the use (by a command
running in the same workspace) makes the open fail instead of leading outside.
``resolve_inside`` remains for code that only needs a path (listing, seeding).

Every host-side access to a workspace goes through that walk too (``open_inside``,
``open_folder_inside``, ``read_inside``): saving uploads, reading images back, seeding,
the context files. A sandboxed command can plant links anywhere in its workspace; the bot,
which runs outside the sandbox, never follows one out.

In a group workspace every file the group's prompt shows (``GROUP_PROTECTED``, derived from
``GROUP_CONTEXT_FILES``), and everything in its ``skills/`` folder (instructions the bot follows,
``GROUP_PROTECTED_FOLDERS``), is read-only to the model unless the sender is an owner:
``read_only_for`` says so for a located path. BOOTSTRAP.md is neither seeded nor loaded in a
group: a first-run ritual is for one person's own assistant, not for a room.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.messages import ChatType

log = logging.getLogger(__name__)


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
BOOTSTRAP_FILE = "BOOTSTRAP.md"
MEMORY_FILE = "MEMORY.md"
CONTEXT_FILES: tuple[str, ...] = (
    "AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", BOOTSTRAP_FILE, MEMORY_FILE,
)
# What a group's prompt shows: no MEMORY.md (private notes), no BOOTSTRAP.md (see above).
GROUP_CONTEXT_FILES = tuple(name for name in CONTEXT_FILES if name not in (MEMORY_FILE, BOOTSTRAP_FILE))
# Read-only to non-owners in a group: every file its prompt shows, and BOOTSTRAP.md, which
# no group loads but whose name says "follow me" to any prompt that ever would.
GROUP_PROTECTED = (*GROUP_CONTEXT_FILES, BOOTSTRAP_FILE)
SKILLS_FOLDER = "skills"  # a workspace's own Agent Skills (bot.skills)
GROUP_PROTECTED_FOLDERS = (SKILLS_FOLDER,)  # read-only to non-owners in a group, with all they hold
GROUP_UNSEEDED = frozenset({BOOTSTRAP_FILE})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


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
    stack = [os.open(root, _DIR_FLAGS)]
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
            stack.append(os.open(part, _DIR_FLAGS, dir_fd=stack[-1]))  # ELOOP if swapped for a link
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
            fd = os.open(loc.name, _DIR_FLAGS, dir_fd=loc.parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
                os.mkdir(loc.name, 0o700, dir_fd=loc.parent)
            fd = os.open(loc.name, _DIR_FLAGS, dir_fd=loc.parent)
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
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode,
                     dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return fd, name if relative == "." else f"{relative}/{name}"


def read_inside(workspace: Path, user_path: str, max_bytes: int) -> bytes:
    """The bytes of a regular file inside the workspace, walked like ``locate`` (a FIFO or
    a folder raises ``IsADirectoryError``, a file over ``max_bytes`` ``ValueError``)."""
    fd, _ = open_inside(workspace, user_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
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


def read_only_for(relative: str, *, chat_type: str, sender_is_owner: bool) -> bool:
    """True when the model may not write ``relative`` for this sender: a persona or rule
    file at the top of a group workspace, or anything in its ``skills/`` folder (the folder
    itself included), and the sender is not an owner."""
    if sender_is_owner or chat_type != ChatType.GROUP.value:
        return False
    folded = relative.casefold()
    if folded.split("/", 1)[0] in {name.casefold() for name in GROUP_PROTECTED_FOLDERS}:
        return True
    return folded in {name.casefold() for name in GROUP_PROTECTED}


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


# --------------------------------------------------------------------------- naming
#
# One directory per workspace, directly under the root, named from the session key
# (``bot.conversation.workspace_name``, which has the table): the parts are joined by
# ``safe_name``, which keeps readable ids as they are and hashes the rest; see there.

SEEDED_MARKER = ".chatgate-seeded"
MAX_NAME_LEN = 100  # well under NAME_MAX (255 bytes) on every filesystem we care about
_HASH_LEN = 12  # hex digits of sha256: 48 bits
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_HASHED_TAIL = re.compile(rf"-[0-9a-f]{{{_HASH_LEN}}}$")


def safe_name(*parts: str) -> str:
    """``parts`` joined with ``-`` into one directory name made of ``[A-Za-z0-9._-]``.

    A name stays readable as is (``telegram-group--100123``) when every character is
    safe, no part is empty, a part has a ``-`` only as its first character (Telegram's
    negative chat ids), the name starts with neither ``.`` nor ``-``, it is at most
    ``MAX_NAME_LEN`` long and it does not end like a hashed name. Otherwise unsafe
    characters become ``_``, the name is cut, and ``-`` plus 12 hex digits of a hash of
    the original parts is appended: ``a/b`` gives ``a_b-1c2d...`` while ``a_b`` stays.

    So two different part tuples never share a name: kept names parse back uniquely
    (hyphens inside a part force the hash) and never end like a hashed one, and hashed
    names differ unless 48-bit hashes collide. The result is never ``.``, ``..``, hidden,
    or empty.
    """
    if not parts:
        raise ValueError("safe_name needs at least one part")
    joined = "-".join(parts)
    if (
        all(part and "-" not in part[1:] for part in parts)
        and not _UNSAFE.search(joined)
        and joined[0] not in ".-"
        and len(joined) <= MAX_NAME_LEN
        and not _HASHED_TAIL.search(joined)
    ):
        return joined
    raw = "\x00".join(parts).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(raw).hexdigest()[:_HASH_LEN]
    readable = _UNSAFE.sub("_", joined)[: MAX_NAME_LEN - _HASH_LEN - 1]
    if readable[:1] in ("", ".", "-"):
        readable = "_" + readable[1:]
    return f"{readable}-{digest}"


# --------------------------------------------------------------------------- workspaces


class Place(Protocol):
    """Where a turn's files live: what ``Workspaces`` needs of a ``bot.conversation.Conversation``."""

    @property
    def workspace(self) -> str:
        """The workspace's folder name under the root."""
        ...

    @property
    def is_group(self) -> bool: ...


class Workspaces:
    """Finds and seeds per-user workspaces under ``root``.

    ``ensure`` seeds a workspace from ``templates`` at most once per process (a lock per
    path and a set of seeded paths; the hot path is one set lookup) and at most once per
    template file over the workspace's life: the marker file ``.chatgate-seeded`` lists
    the template files already offered, so a file the user deleted on purpose stays
    deleted after a restart, while a template added in a later release still arrives.
    An existing file is never overwritten (files are created with O_EXCL).
    """

    def __init__(self, root: Path, templates: Path) -> None:
        self.root = Path(root)
        self.templates = Path(templates)
        self._seeded: set[Path] = set()
        self._locks: dict[Path, asyncio.Lock] = {}

    def dir_for(self, conversation: Place) -> Path:
        """The conversation's workspace (not created; see ``ensure``)."""
        return self.root / conversation.workspace

    async def prepare(self, conversation: Place) -> Path:
        """``dir_for`` then ``ensure``: the ready workspace of the conversation."""
        return await self.ensure(self.dir_for(conversation), group=conversation.is_group)

    async def ensure(self, path: Path, *, group: bool = False) -> Path:
        """Create ``path`` (mode 0700) and seed it from the templates (a group's without
        ``GROUP_UNSEEDED``); returns ``path``."""
        if path in self._seeded:
            return path
        if Path(os.path.abspath(path)).parent != Path(os.path.abspath(self.root)):
            raise ValueError(f"{path} is not a workspace under {self.root}")
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            if path in self._seeded:
                return path
            skip = GROUP_UNSEEDED if group else frozenset()
            copied = await asyncio.to_thread(seed_workspace, path, self.templates, skip)
            self._seeded.add(path)
            self._locks.pop(path, None)  # waiters hold the lock object; newcomers hit the set
        if copied:
            log.info("workspace %s seeded with %s", path, ", ".join(copied))
        return path


def _template_files(templates: Path) -> list[str]:
    """Relative POSIX paths of the regular template files, dotfiles (``.gitkeep``) left out."""
    if not templates.is_dir():
        log.warning("workspace templates %s not found; workspaces start empty", templates)
        return []
    found = []
    for file in templates.rglob("*"):
        rel = file.relative_to(templates)
        if file.is_file() and not any(part.startswith(".") for part in rel.parts):
            found.append(rel.as_posix())
    return sorted(found)


def _read_marker(workspace: Path) -> set[str]:
    try:
        fd, _ = open_inside(workspace, SEEDED_MARKER, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise IsADirectoryError(f"{SEEDED_MARKER} is not a regular file")
            text = fh.read(1 << 20).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:  # a folder or a link out in its place: offer everything, overwrite nothing
        log.warning("seeding marker in %s unreadable: %s", workspace, exc)
        return set()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def _write_marker(workspace: Path, offered: set[str]) -> None:
    """Replace the marker atomically, through the workspace's descriptor: a link planted
    under the temporary name is never followed (O_EXCL), and rename replaces a link itself."""
    header = "# chatgate: template files already offered to this workspace (delete a line to get one again)"
    data = ("\n".join([header, *sorted(offered)]) + "\n").encode("utf-8")
    tmp = f"{SEEDED_MARKER}.{os.getpid()}.{threading.get_ident()}.tmp"
    root = os.open(os.path.realpath(workspace), _DIR_FLAGS)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=root)  # a leftover of a crash, or something planted there
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     0o600, dir_fd=root)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, SEEDED_MARKER, src_dir_fd=root, dst_dir_fd=root)
    finally:
        os.close(root)


def seed_workspace(path: Path, templates: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Blocking: create ``path`` and copy in the template files never offered to it before
    (``skip``: files this kind of workspace never gets, e.g. BOOTSTRAP.md in a group).

    A file that exists is left alone; every offered file is recorded in the marker, so
    it is not offered again. Every write is walked from the workspace's descriptor
    (``open_inside``): a link planted by a command is never followed out. Returns the
    files copied.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    offered = _read_marker(path)
    new = [rel for rel in _template_files(templates) if rel not in offered and rel not in skip]
    if not new:
        return []
    copied: list[str] = []
    settled: list[str] = []  # copied or already there; a failed copy is offered again next time
    for rel in new:
        try:
            data = (templates / rel).read_bytes()  # before creating dest: no empty leftovers
            fd, _ = create_inside(path, rel, 0o600)  # O_EXCL: never overwrite, even racing another process
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            copied.append(rel)
            settled.append(rel)
        except FileExistsError:
            settled.append(rel)
        except (OSError, ValueError) as exc:  # OutsideWorkspaceError included; skip the file, seed the rest
            log.warning("workspace %s: could not seed %s: %s", path, rel, exc)
    _write_marker(path, offered | set(settled))
    return copied


# --------------------------------------------------------------------------- context files

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


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


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
        fd, relative = open_inside(workspace, name, _READ_FLAGS)
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
    kept = min(len(text), cap)
    if more_bytes:
        more, unit = more_bytes, "bytes"
    else:
        more, unit = len(text) - kept, "characters"
    body = text[:kept]
    if more:
        marked = ContextFile(name, f"{body}\n\n{truncation_marker(name, more, unit)}", True)
        return _Entry(key, marked, kept, more, unit)
    return _Entry(key, ContextFile(name, body), kept, 0, unit)


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
            fd = os.open(real, _READ_FLAGS | os.O_NOFOLLOW)
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


INBOX = "inbox"


def save_upload(workspace: Path, name: str, data: bytes) -> str:
    """Save a file the user sent into ``inbox/`` of the workspace (blocking: call it in a
    thread). The name is sanitised and never overwrites: ``report.pdf``, ``report-2.pdf``...
    The inbox is walked like every path inside a workspace (``open_folder_inside``): an
    ``inbox`` link a command planted is followed only inside the workspace, and one leading
    out raises ``OutsideWorkspaceError``. Returns the path relative to the workspace."""
    clean = _UNSAFE.sub("_", Path(name).name).lstrip(".-") or "file"
    stem, dot, suffix = clean[:100].rpartition(".")
    if not dot:
        stem, suffix = clean[:100], ""
    dir_fd, folder = open_folder_inside(workspace, INBOX, create=True)
    try:
        for n in range(1, 1000):
            candidate = f"{stem}-{n}" if n > 1 else stem
            target = f"{candidate}.{suffix}" if suffix else candidate
            try:  # exclusive, and never through a link: never overwrite, never lead out
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                             0o644, dir_fd=dir_fd)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return f"{folder}/{target}"
    finally:
        os.close(dir_fd)
    raise FileExistsError(f"too many files named {clean} in {INBOX}")
