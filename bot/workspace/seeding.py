"""Finding and seeding workspaces: ``Workspaces`` gives a conversation its folder under the
root, created and seeded from the templates before its first run.

Seeding copies the template files never offered to the workspace before, through the
fence (``create_inside``: ``O_EXCL``, never through a link, never over an existing file), and
records each offered file in the marker ``.chatgate-seeded``, so a file the user deleted
stays deleted after a restart while a template added in a later release still arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import threading
from pathlib import Path
from typing import Protocol

from bot.workspace.fence import CREATE_FLAGS, DIR_FLAGS, READ_FLAGS, create_inside, open_inside
from bot.workspace.layout import GROUP_UNSEEDED

log = logging.getLogger(__name__)

SEEDED_MARKER = ".chatgate-seeded"


class Place(Protocol):
    """Where a turn's files live: what ``Workspaces`` needs of a ``bot.conversation.Conversation``."""

    @property
    def workspace(self) -> str:
        """The workspace's folder name under the root."""

    @property
    def is_group(self) -> bool: ...


class Workspaces:
    """Finds and seeds per-user workspaces under ``root``: ``ensure`` seeds a workspace from
    ``templates`` at most once per process (a lock per path and a set of seeded paths; the hot
    path is one set lookup), and each template file at most once over its life (the marker)."""

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
        fd, _ = open_inside(workspace, SEEDED_MARKER, READ_FLAGS)
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
    root = os.open(os.path.realpath(workspace), DIR_FLAGS)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=root)  # a leftover of a crash, or something planted there
        fd = os.open(tmp, CREATE_FLAGS, 0o600, dir_fd=root)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, SEEDED_MARKER, src_dir_fd=root, dst_dir_fd=root)
    finally:
        os.close(root)


def seed_workspace(path: Path, templates: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Blocking: create ``path`` and copy in the template files never offered to it before
    (``skip``: files this kind of workspace never gets, e.g. BOOTSTRAP.md in a group), then
    record them in the marker; the files copied. A file that exists is left alone."""
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
