"""Reading a folder of skills from disk (blocking), and the stamp that says it changed.

A folder of skills holds one subfolder per skill, each with its ``SKILL.md``; files beside
them and hidden names (``.git``) are passed over. Only the head of each ``SKILL.md`` is
read (its front matter), never its body: ``read_skill`` reads that when it is asked for.

Two kinds of folder, two rules for links:

- a **shared** folder (``skills.paths``) is the owner's: links in it are followed, and each
  skill's fence is its own folder, resolved;
- a workspace's ``skills/`` can be written by the bot's tools and commands, so nothing in
  it is read through a link: the folder, each skill's folder and each ``SKILL.md`` are
  opened with ``O_NOFOLLOW`` from the workspace's descriptor, and a link is a problem
  (reported), never followed.

``Stamp``: the folder's own stat and each skill's ``SKILL.md`` stat, taken before it is
read. A skill added, removed or renamed changes the folder's; a ``SKILL.md`` edited in
place (or replaced) changes its own. Checking costs one stat of the folder, plus one per
subfolder when it exists; a missing folder costs one stat.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.agent.guard import GuardMode
from bot.agent.guard import scan as injection_patterns
from bot.skills.catalog import EMPTY, Catalog, Origin, Problem, Skill
from bot.skills.format import SKILL_FILE, SkillFormatError, parse_skill, split_front_matter
from bot.workspace import SKILLS_FOLDER

MAX_SKILLS = 200  # skill folders read from one folder; the rest are a problem
HEAD_BYTES = 64 * 1024  # of a SKILL.md, read to find its front matter
_DIR = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_FILE = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

StatKey = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns
Fence = Callable[[str], tuple[Path, str]]  # a skill folder's name -> (base, prefix) of its Skill
LINKED = "is a link: a workspace's skills are never read through a link"


@dataclass(frozen=True, slots=True)
class Stamp:
    folder: StatKey | None  # None: missing (or unreadable)
    entries: tuple[tuple[str, StatKey | None], ...] = ()  # (skill folder, its SKILL.md's stat)


@dataclass(frozen=True, slots=True)
class Scanned:
    """A folder's catalog and the stamp it was read under."""

    catalog: Catalog
    stamp: Stamp

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.stamp.entries)


def _key(path: str, follow: bool) -> StatKey | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def stamp(folder: Path, names: tuple[str, ...], *, follow: bool) -> Stamp:
    """The folder's stamp now, for the skill folders ``names`` of its last scan."""
    here = _key(str(folder), follow)
    if here is None:
        return Stamp(None)
    return Stamp(here, tuple((name, _key(os.path.join(folder, name, SKILL_FILE), follow)) for name in names))


def shared_folder(folder: Path, guard: GuardMode) -> Scanned:
    """Scan a shared folder of skills (links followed: the folder is the owner's)."""
    before = _key(str(folder), True)
    try:
        fd = os.open(folder, _DIR)
    except OSError as exc:
        if before is not None:  # there, but not a folder we can read
            return Scanned(Catalog((), (Problem(folder, f"cannot be read: {exc.strerror or exc}"),)), Stamp(before))
        return Scanned(EMPTY, Stamp(None))
    try:
        return _scan(fd, folder, guard, follow=True, fence=lambda name: (Path(os.path.realpath(folder / name)), "."),
                     before=before)
    finally:
        os.close(fd)


def workspace_folder(workspace: Path, guard: GuardMode) -> Scanned:
    """Scan the ``skills/`` folder of a workspace, following no link."""
    folder = workspace / SKILLS_FOLDER
    before = _key(str(folder), False)
    if before is None:
        return Scanned(EMPTY, Stamp(None))
    try:
        root = os.open(os.path.realpath(workspace), _DIR | os.O_NOFOLLOW)
        try:
            fd = os.open(SKILLS_FOLDER, _DIR | os.O_NOFOLLOW, dir_fd=root)
        finally:
            os.close(root)
    except OSError as exc:
        why = (LINKED if exc.errno == errno.ELOOP
               else "is not a folder" if exc.errno == errno.ENOTDIR else f"cannot be read: {exc.strerror or exc}")
        return Scanned(Catalog((), (Problem(folder, why),)), Stamp(before))
    try:
        return _scan(fd, folder, guard, follow=False, fence=lambda name: (workspace, f"{SKILLS_FOLDER}/{name}"),
                     before=before)
    finally:
        os.close(fd)


def _scan(fd: int, folder: Path, guard: GuardMode, *, follow: bool,
          fence: Fence, before: StatKey | None) -> Scanned:
    origin = Origin.SHARED if follow else Origin.WORKSPACE
    skills: list[Skill] = []
    problems: list[Problem] = []
    entries: list[tuple[str, StatKey | None]] = []
    try:
        with os.scandir(fd) as listing:
            found = sorted((e for e in listing if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as exc:
        return Scanned(Catalog((), (Problem(folder, f"cannot be listed: {exc.strerror or exc}"),)), Stamp(before))
    for entry in found:
        path = folder / entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=follow)
            is_link = entry.is_symlink()
        except OSError:
            continue
        if not is_dir:
            if is_link and not follow:
                problems.append(Problem(path, LINKED))
            continue  # a file beside the skills (README.md): not a skill
        if len(entries) == MAX_SKILLS:
            problems.append(Problem(folder, f"holds more than {MAX_SKILLS} skill folders; the rest are ignored"))
            break
        entries.append((entry.name, _key(os.path.join(folder, entry.name, SKILL_FILE), follow)))
        try:
            text = _head(fd, entry.name, follow)
            info = parse_skill(text, entry.name)
        except SkillFormatError as exc:
            problems.append(Problem(path / SKILL_FILE, str(exc)))
            continue
        except FileNotFoundError:
            problems.append(Problem(path, f"has no {SKILL_FILE}"))
            continue
        except OSError as exc:
            why = LINKED if exc.errno == errno.ELOOP and not follow else f"cannot be read: {exc.strerror or exc}"
            problems.append(Problem(path / SKILL_FILE, why))
            continue
        base, prefix = fence(entry.name)
        flagged = injection_patterns(info.description) if guard is not GuardMode.OFF else ()
        skills.append(Skill(info, origin, base, prefix, path / SKILL_FILE, flagged))
    catalog = Catalog(tuple(skills), tuple(problems)) if skills or problems else EMPTY
    return Scanned(catalog, Stamp(before, tuple(entries)))


def _head(folder_fd: int, name: str, follow: bool) -> str:
    """The head of ``name/SKILL.md``, enough for its front matter (a ``SkillFormatError`` when
    the front matter does not end within it)."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    skill_fd = os.open(name, _DIR | nofollow, dir_fd=folder_fd)
    try:
        fd = os.open(SKILL_FILE, _FILE | nofollow, dir_fd=skill_fd)
    finally:
        os.close(skill_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SkillFormatError(f"{SKILL_FILE} is not a regular file")
        data = handle.read(HEAD_BYTES)
    text = data.decode("utf-8", errors="replace")
    if info.st_size > HEAD_BYTES:
        try:
            split_front_matter(text)
        except SkillFormatError:
            raise SkillFormatError(f"its front matter does not end within the first {HEAD_BYTES // 1024} KB") from None
    return text
