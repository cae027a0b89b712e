"""Reading a skill's files for ``read_skill`` (blocking: the tool runs it in a thread).

Every path is walked with the workspace's walk (``bot.workspace.open_inside``: ``O_NOFOLLOW``
one name at a time, a link followed by hand and only inside the fence) from the skill's
``base``, and the place it led to must be inside the skill's folder: a shared skill's fence
is its own folder; a workspace skill's is the workspace, and the walk's resolved path must
stay under ``skills/<name>/``. So ``../`` and links out of the skill's folder are refused,
also when a link is swapped in while the tool runs. Reads are capped; problems are
``ToolError`` sentences that never show a host path.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from bot.skills.catalog import Skill
from bot.skills.format import SKILL_FILE, SkillFormatError, skill_body
from bot.tools.base import ToolError
from bot.tools.paths import short_path
from bot.workspace import OutsideWorkspaceError, PathTooLongError, open_folder_inside, open_inside, truncation_marker

MAX_BYTES = 1024 * 1024  # read of one file; the rest is counted, not read
MAX_CHARS = 40_000  # of text given to the model
MAX_LISTED = 60  # files named with the instructions
MAX_DEPTH = 4  # folders below the skill's, listed
_SNIFF = 8192
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class Listing:
    files: tuple[tuple[str, int | None], ...]  # (path inside the skill, size; None for a link)
    more: int  # files not named (over MAX_LISTED)


def _inside(skill: Skill, relative: str) -> bool:
    """Is a walk's resolved ``relative`` path (from ``skill.base``) the skill's folder or below it?"""
    return skill.prefix == "." or relative == skill.prefix or relative.startswith(f"{skill.prefix}/")


def _refusal(skill: Skill, file: str, exc: OSError | ValueError) -> ToolError:
    shown = short_path(file)
    if isinstance(exc, OutsideWorkspaceError):
        return ToolError(f"{shown} is outside the folder of skill {skill.name}; give a path inside it, "
                         "as its instructions list them")
    if isinstance(exc, PathTooLongError):
        return ToolError(f"{exc}; use shorter names")
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"skill {skill.name} has no file {shown}; read_skill({skill.name!r}) lists its files")
    if isinstance(exc, ValueError):
        return ToolError(f"{shown!r} is not a valid path")
    if exc.errno == errno.ELOOP:
        return ToolError(f"{shown} is a link that changed while it was read; try again")
    return ToolError(f"cannot read {shown} of skill {skill.name}: {exc.strerror or 'error'}")


def _read(skill: Skill, file: str) -> tuple[bytes, int]:
    """The head (``MAX_BYTES``) of a regular file of the skill, and the file's whole size."""
    if file.startswith("/") or "\\" in file:
        raise ToolError(f"{file} is not a path inside skill {skill.name}; give one like references/guide.md")
    path = file if skill.prefix == "." else f"{skill.prefix}/{file}"
    try:
        fd, relative = open_inside(skill.base, path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:
        raise _refusal(skill, file, exc) from None
    with os.fdopen(fd, "rb") as handle:
        if not _inside(skill, relative):
            raise _refusal(skill, file, OutsideWorkspaceError(file))
        info = os.fstat(handle.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{file} is a folder; read_skill({skill.name!r}) lists the skill's files")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{file} is not a regular file")
        try:
            return handle.read(MAX_BYTES), info.st_size
        except OSError as exc:
            raise _refusal(skill, file, exc) from None


def _capped(text: str, unread: int, shown: str) -> str:
    """``text`` cut at ``MAX_CHARS``, with a marker saying what was left out (``unread``: bytes
    of the file never read)."""
    if len(text) > MAX_CHARS:
        more = f"{len(text) - MAX_CHARS:,} characters" + (f" and {unread:,} bytes" if unread else "")
        return f"{text[:MAX_CHARS]}\n\n[… truncated: {more} more in {shown}]"
    if unread:
        return f"{text}\n\n{truncation_marker(shown, unread, 'bytes')}"
    return text


def read_instructions(skill: Skill) -> str:
    """The body of the skill's ``SKILL.md`` (its front matter left out), capped."""
    data, size = _read(skill, SKILL_FILE)
    try:
        body = skill_body(data.decode("utf-8", errors="replace"))
    except SkillFormatError as exc:
        raise ToolError(f"skill {skill.name} changed and is no longer valid: {exc}") from None
    return _capped(body, size - len(data), f"{skill.name}/{SKILL_FILE}")


def read_file(skill: Skill, file: str) -> str:
    """A text file of the skill's folder, capped."""
    data, size = _read(skill, file)
    shown = f"{skill.name}/{file}"
    if b"\0" in data[:_SNIFF]:
        raise ToolError(f"{shown} is a binary file ({size:,} bytes); read_skill shows text files only")
    return _capped(data.decode("utf-8", errors="replace"), size - len(data), shown)


def list_files(skill: Skill) -> Listing:
    """The files of the skill's folder but its ``SKILL.md``, by path (hidden names and links'
    targets are not walked; at most ``MAX_DEPTH`` folders deep)."""
    try:
        fd, relative = open_folder_inside(skill.base, skill.prefix)
    except (OSError, ValueError):
        return Listing((), 0)
    found: list[tuple[str, int | None]] = []
    more = 0

    def visit(folder: int, prefix: str, depth: int) -> None:
        nonlocal more
        with os.scandir(folder) as listing:
            entries = sorted((e for e in listing if not e.name.startswith(".")), key=lambda e: e.name)
        for entry in entries:
            path = f"{prefix}{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH:
                        inner = os.open(entry.name, _DIR, dir_fd=folder)
                        try:
                            visit(inner, f"{path}/", depth + 1)
                        finally:
                            os.close(inner)
                    continue
                size = None if entry.is_symlink() else entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if path == SKILL_FILE:
                continue
            if len(found) < MAX_LISTED:
                found.append((path, size))
            else:
                more += 1

    try:
        if _inside(skill, relative):
            visit(fd, "", 0)
    except OSError:
        pass
    finally:
        os.close(fd)
    return Listing(tuple(found), more)
