"""Per-user workspaces: where a session's files live, and the fence around them.

The fence: ``locate`` walks a path one component at a time from the workspace's directory
descriptor, opening each folder with ``O_NOFOLLOW`` and following a symlink only by reading
it and walking its target the same way, inside the workspace. What it returns is an open
descriptor of the folder that holds the file and the file's name in there, so the tool
opens the file with ``dir_fd`` and ``O_NOFOLLOW`` too: nothing is checked by path and then
used by path, and a symlink swapped in between the check and the use (by a command
running in the same workspace) makes the open fail instead of leading outside.
``resolve_inside`` remains for code that only needs a path (listing, seeding).

In a group workspace the files that shape the bot (``GROUP_PROTECTED``: AGENTS.md, SOUL.md,
IDENTITY.md, TOOLS.md) are read-only to the model unless the sender is an owner:
``read_only_for`` says so for a located path.
"""

from __future__ import annotations

import asyncio
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
from typing import Literal

from bot.messages import ChatType, InboundMessage

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
GROUP_PROTECTED = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md")
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
    file at the top of a group workspace, and the sender is not an owner."""
    if sender_is_owner or chat_type != ChatType.GROUP.value:
        return False
    return relative.casefold() in {name.casefold() for name in GROUP_PROTECTED}


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
# One directory per workspace, directly under the root:
#
# | context                               | directory                                   |
# | DM                                    | {platform}-{user_id}                        |
# | DM of a linked person (dm_scope)      | {person}                                    |
# | group / channel (group_scope default) | {platform}-group-{chat_id}                  |
# | group, group_scope: per-user          | {platform}-group-{chat_id}-user-{user_id}   |
#
# Threads and forum topics share their group's workspace. The parts are joined by
# ``safe_name``, which keeps readable ids as they are and hashes the rest; see there.

GroupScope = Literal["per-group", "per-user"]

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


class Workspaces:
    """Finds and seeds per-user workspaces under ``root``.

    ``ensure`` seeds a workspace from ``templates`` at most once per process (a lock per
    path and a set of seeded paths; the hot path is one set lookup) and at most once per
    template file over the workspace's life: the marker file ``.chatgate-seeded`` lists
    the template files already offered, so a file the user deleted on purpose stays
    deleted after a restart, while a template added in a later release still arrives.
    An existing file is never overwritten (files are created with O_EXCL).
    """

    def __init__(self, root: Path, templates: Path, group_scope: GroupScope = "per-group") -> None:
        if group_scope not in ("per-group", "per-user"):
            raise ValueError(f"group_scope must be 'per-group' or 'per-user', not {group_scope!r}")
        self.root = Path(root)
        self.templates = Path(templates)
        self.group_scope: GroupScope = group_scope
        self._seeded: set[Path] = set()
        self._locks: dict[Path, asyncio.Lock] = {}

    def dir_for(self, msg: InboundMessage, *, person: str | None = None) -> Path:
        """The workspace of the message's session (not created; see ``ensure``).

        ``person`` is the linked identity of a DM sender (``dm_scope: linked``); it is
        ignored in groups, whose workspaces belong to the chat (or, per-user, to the
        sender in that chat).
        """
        if msg.chat_type is ChatType.DM:
            name = safe_name(person) if person else safe_name(msg.platform, msg.sender.id)
        elif self.group_scope == "per-user":
            name = safe_name(msg.platform, "group", msg.chat_id, "user", msg.sender.id)
        else:
            name = safe_name(msg.platform, "group", msg.chat_id)
        return self.root / name

    async def prepare(self, msg: InboundMessage, *, person: str | None = None) -> Path:
        """``dir_for`` then ``ensure``: the ready workspace of the message's session."""
        return await self.ensure(self.dir_for(msg, person=person))

    async def ensure(self, path: Path) -> Path:
        """Create ``path`` (mode 0700) and seed it from the templates; returns ``path``."""
        if path in self._seeded:
            return path
        if Path(os.path.abspath(path)).parent != Path(os.path.abspath(self.root)):
            raise ValueError(f"{path} is not a workspace under {self.root}")
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            if path in self._seeded:
                return path
            copied = await asyncio.to_thread(seed_workspace, path, self.templates)
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


def _read_marker(marker: Path) -> set[str]:
    try:
        text = marker.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return set()
    except OSError as exc:  # say, a directory in its place: offer everything, overwrite nothing
        log.warning("seeding marker %s unreadable: %s", marker, exc)
        return set()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def seed_workspace(path: Path, templates: Path) -> list[str]:
    """Blocking: create ``path`` and copy in the template files never offered to it before.

    A file that exists is left alone; every offered file is recorded in the marker, so
    it is not offered again. Returns the files copied.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker = path / SEEDED_MARKER
    offered = _read_marker(marker)
    new = [rel for rel in _template_files(templates) if rel not in offered]
    if not new:
        return []
    copied: list[str] = []
    settled: list[str] = []  # copied or already there; a failed copy is offered again next time
    for rel in new:
        dest = path / rel
        try:
            resolve_inside(path, rel)  # a symlinked parent must not lead the copy outside
            data = (templates / rel).read_bytes()  # before creating dest: no empty leftovers
            dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(dest, "xb") as out:  # O_EXCL: never overwrite, even racing another process
                out.write(data)
            os.chmod(dest, 0o600)
            copied.append(rel)
            settled.append(rel)
        except FileExistsError:
            settled.append(rel)
        except OSError as exc:  # OutsideWorkspaceError included; skip the file, seed the rest
            log.warning("workspace %s: could not seed %s: %s", path, rel, exc)
    header = "# chatgate: template files already offered to this workspace (delete a line to get one again)"
    tmp = marker.with_name(f"{SEEDED_MARKER}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text("\n".join([header, *sorted(offered | set(settled))]) + "\n", encoding="utf-8")
    os.replace(tmp, marker)
    return copied


# --------------------------------------------------------------------------- context files

CONTEXT_FILES: tuple[str, ...] = (
    "AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "MEMORY.md",
)
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


def _stat_regular(workspace: Path, name: str) -> tuple[Path, os.stat_result] | None:
    """The file's real path and stat when it is a regular file inside the workspace."""
    path = workspace / name
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):  # the fence: a symlink may not lead outside the workspace
            path = resolve_inside(workspace, name)
            st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # OutsideWorkspaceError included
        log.warning("context file %s skipped: %s", path, exc)
        return None
    return (path, st) if stat.S_ISREG(st.st_mode) else None


def _read(path: Path, name: str, cap: int, key: tuple[int, int, int, int, int]) -> _Entry:
    # O_NONBLOCK: should a FIFO be swapped in after the stat, opening it must not hang
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
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


def load_context_files(
    path: Path,
    names: Sequence[str] = CONTEXT_FILES,
    *,
    per_file_cap: int = PER_FILE_CAP,
    total_cap: int = TOTAL_CAP,
) -> list[ContextFile]:
    """The workspace's context files that exist and are not blank, in the order of ``names``.

    Each is cut at ``per_file_cap`` characters and all together at ``total_cap``, with a
    visible marker where text was left out. Blocking but cheap: an unchanged file costs
    one ``lstat`` (reads are cached by path, mtime, ctime, size and inode); callers on
    an event loop may still wrap it in ``asyncio.to_thread``. Symlinks that lead outside
    the workspace, and anything that is not a regular file, are skipped.
    """
    files: list[ContextFile] = []
    budget = total_cap
    for name in names:
        if not name or name in (".", "..") or "/" in name or os.sep in name:
            raise ValueError(f"context file names are plain file names, not {name!r}")
        found = _stat_regular(path, name)
        if found is None:
            continue
        real, st = found
        key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, per_file_cap)
        entry = _cache.get(str(real), key)
        if entry is None:
            try:
                entry = _read(real, name, per_file_cap, key)
            except OSError as exc:
                log.warning("context file %s unreadable: %s", real, exc)
                continue
            _cache.put(str(real), entry)
        if entry.file is None:
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
    Returns the path relative to the workspace."""
    inbox = Path(workspace) / INBOX
    inbox.mkdir(mode=0o700, exist_ok=True)
    clean = _UNSAFE.sub("_", Path(name).name).lstrip(".-") or "file"
    stem, dot, suffix = clean[:100].rpartition(".")
    if not dot:
        stem, suffix = clean[:100], ""
    for n in range(1, 1000):
        candidate = f"{stem}-{n}" if n > 1 else stem
        target = inbox / (f"{candidate}.{suffix}" if suffix else candidate)
        try:
            with open(target, "xb") as f:  # exclusive: never overwrite
                f.write(data)
        except FileExistsError:
            continue
        return f"{INBOX}/{target.name}"
    raise FileExistsError(f"too many files named {clean} in {inbox}")
