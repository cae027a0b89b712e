"""Finding things in the workspace: ``list_files`` (a folder, or a glob over its tree) and
``search_files`` (a regular expression over the text files of a tree, with line numbers).

Both walk with ``bot.tools.paths.walk`` (sorted, ``.git`` and symlinked folders never
entered) and both are capped, saying so in their last line with how to narrow the ask.
``search_files`` skips binary files, files over ``MAX_SEARCH_FILE_BYTES`` and links that
lead out of the workspace; its pattern runs under a deadline (the ``regex`` module's
timeout), so a pattern that backtracks forever ends the search with a note instead of
pinning a thread. Compiling is the other danger (``bot.tools.pattern_size`` says why): a pattern
is measured and refused over ``MAX_PATTERN_UNITS``, then compiled in a worker thread the search
stops waiting for after ``COMPILE_SECONDS`` (the thread cannot be stopped: the measure keeps it short).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from bot.tools.base import ToolCategory, ToolContext, ToolError, tool
from bot.tools.paths import confined, human_size, inside, looks_binary, open_regular, short_path, walk, workspace_root
from bot.tools.pattern_size import expanded_size

if TYPE_CHECKING:
    import regex

MAX_LIST_ENTRIES = 500
MAX_SEARCH_RESULTS = 200  # the most matching lines one search may return
DEFAULT_SEARCH_RESULTS = 50
MAX_SEARCH_CHARS = 20_000  # of output; lines stop being added past it
MAX_MATCH_LINE_CHARS = 300  # a matching line is cut around its match to this
MAX_SEARCH_FILE_BYTES = 5 * 1024 * 1024  # bigger files are skipped (and counted)
MAX_SEARCH_BYTES = 100 * 1024 * 1024  # read in one search, all files together
SEARCH_SECONDS = 10.0  # the time budget of one search (walk and pattern)
MAX_PATTERN_CHARS = 1000  # a search pattern is a line, not a program
MAX_PATTERN_UNITS = 100_000  # what a pattern may compile to, counted repeats unrolled (pattern_size)
COMPILE_SECONDS = 5.0  # a pattern under the units budget compiles in well under a second
MAX_WALK_ENTRIES = 100_000  # files and folders one glob or search looks at


# -- list_files --------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def list_files(ctx: ToolContext, path: str = ".", pattern: str | None = None) -> str:
    """List files and folders in the workspace: folders end with `/`, files show their size.

    Args:
        path: Folder to list, relative to the workspace.
        pattern: Optional glob such as `*.md`; when given, subfolders are searched too.
    """
    return await asyncio.to_thread(_list, confined(ctx, path), workspace_root(ctx), path, pattern)


def _list(folder: Path, root: Path, shown: str, pattern: str | None) -> str:
    try:
        exists, is_dir = folder.exists(), folder.is_dir()
    except OSError as exc:  # e.g. a name too long: say so with the model's own (relative) path
        raise ToolError(f"cannot list {short_path(shown)}: {exc.strerror or 'error'}") from None
    if not exists:
        raise ToolError(f"no such folder: {shown}")
    if not is_dir:
        raise ToolError(f"{shown} is a file, not a folder; use read_file to read it")
    try:
        entries, complete = _glob(folder, root, pattern) if pattern else _children(folder, root)
    except OSError as exc:
        raise ToolError(f"cannot list {shown}: {exc.strerror or exc}") from None
    if not entries:
        return f"no entries match {pattern!r} in {shown}" if pattern else f"the folder {shown} is empty"
    if not complete:
        why = (f"at {MAX_LIST_ENTRIES} entries" if len(entries) >= MAX_LIST_ENTRIES
               else f"after looking at {MAX_WALK_ENTRIES:,} files and folders")
        entries.append(f"[listing stopped {why}; narrow it with path or pattern]")
    return "\n".join(entries)


def _children(folder: Path, root: Path) -> tuple[list[str], bool]:
    with os.scandir(folder) as scan:
        items = sorted(scan, key=lambda e: e.name.casefold())
    lines = [_describe(entry, entry.name, root) for entry in items[:MAX_LIST_ENTRIES]]
    return lines, len(items) <= MAX_LIST_ENTRIES


def _glob(folder: Path, root: Path, pattern: str) -> tuple[list[str], bool]:
    lines: list[str] = []
    for seen, (rel, entry) in enumerate(walk(folder)):
        if seen == MAX_WALK_ENTRIES:
            return lines, False
        if fnmatch(rel if "/" in pattern else entry.name, pattern):
            if len(lines) == MAX_LIST_ENTRIES:
                return lines, False
            lines.append(_describe(entry, rel, root))
    return lines, True


def _describe(entry: os.DirEntry[str], rel: str, root: Path) -> str:
    if entry.is_symlink():
        if not inside(root, entry):
            return f"{rel} -> (outside the workspace)"
        if not os.path.exists(entry.path):
            return f"{rel} -> (broken link)"
    try:
        if entry.is_dir():
            return f"{rel}/"
        return f"{rel}  {human_size(entry.stat().st_size)}"
    except OSError:
        return f"{rel}  (unreadable)"


# -- search_files ------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def search_files(ctx: ToolContext, pattern: str, path: str = ".", include: str | None = None,
                       ignore_case: bool = False, max_results: int = DEFAULT_SEARCH_RESULTS) -> str:
    """Search the text files of the workspace for a regular expression; prints `path:line: text`
    for each matching line (paths relative to the workspace), binary files skipped.

    Args:
        pattern: A regular expression (Python syntax), e.g. `TODO|FIXME` or `def \\w+_test`.
        path: Folder (or one file) to search, relative to the workspace.
        include: Optional glob on file names, e.g. `*.md`; with a `/` it matches the path below `path`.
        ignore_case: Match letters regardless of case.
        max_results: The most matching lines to show (up to 200).
    """
    if not 1 <= max_results <= MAX_SEARCH_RESULTS:
        raise ToolError(f"max_results must be between 1 and {MAX_SEARCH_RESULTS}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"the pattern is {len(pattern):,} characters long, over the {MAX_PATTERN_CHARS:,} "
                        "allowed; shorten it")
    import regex  # here: ~1.3 MB that a bot which never searches does not carry

    try:
        async with asyncio.timeout(COMPILE_SECONDS):
            compiled = await asyncio.to_thread(_compile, pattern, regex.IGNORECASE if ignore_case else 0)
    except TimeoutError:
        raise ToolError(f"the pattern took over {COMPILE_SECONDS:g} s to compile; simplify it") from None
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    target, root = confined(ctx, path), workspace_root(ctx)
    found = await asyncio.to_thread(_search, target, root, path, compiled, include, max_results)
    return found.render(pattern, path, max_results)


def _compile(pattern: str, flags: int) -> regex.Pattern[str]:
    """Measure, then compile: a pattern over ``MAX_PATTERN_UNITS`` is refused before ``regex``
    starts unrolling it (which no timeout could stop)."""
    import regex

    if expanded_size(pattern, flags) > MAX_PATTERN_UNITS:
        raise ToolError("the pattern repeats too much to compile (its counted repeats such as {m,n}, multiplied "
                        f"out, pass {MAX_PATTERN_UNITS:,} steps); simplify it, with smaller counts or fewer "
                        "nested repeats")
    return regex.compile(pattern, flags)


@dataclass
class _Found:
    lines: list[str] = field(default_factory=list)
    chars: int = 0
    matches: int = 0  # matching lines seen, shown or not
    files: set[str] = field(default_factory=set)
    skipped_big: int = 0
    stopped: str | None = None  # why the search ended early

    def add(self, rel: str, number: int, line: str, at: int, limit: int) -> None:
        self.matches += 1
        self.files.add(rel)
        if len(self.lines) >= limit or self.chars >= MAX_SEARCH_CHARS:
            return
        entry = f"{rel}:{number}: {_around(line, at)}"
        self.lines.append(entry)
        self.chars += len(entry) + 1

    def render(self, pattern: str, shown: str, limit: int) -> str:
        notes: list[str] = []
        if self.stopped:
            notes.append(f"[search stopped early: {self.stopped}; narrow it with path, include or the pattern]")
        if self.matches > len(self.lines):
            why = f"max_results={limit}" if len(self.lines) >= limit else f"the {MAX_SEARCH_CHARS:,}-character cap"
            least = "at least " if self.stopped else ""
            notes.append(f"[{least}{self.matches:,} matching lines in {len(self.files):,} files; showing the first "
                         f"{len(self.lines)} ({why}); narrow it with path, include or the pattern]")
        if self.skipped_big:
            notes.append(f"[{self.skipped_big} files over {human_size(MAX_SEARCH_FILE_BYTES)} not searched]")
        if not self.lines:
            return "\n".join([f"no lines match {pattern!r} in {shown}", *notes])
        return "\n".join([*self.lines, *notes])


def _search(target: Path, root: Path, shown: str, compiled: regex.Pattern[str], include: str | None,
            limit: int) -> _Found:
    if not target.exists():
        raise ToolError(f"no such file or folder: {shown}")
    found = _Found()
    deadline = time.monotonic() + SEARCH_SECONDS
    budget = MAX_SEARCH_BYTES
    prefix = "" if target == root else f"{target.relative_to(root).as_posix()}/"
    if target.is_dir():
        candidates = ((f"{prefix}{rel}", rel, os.path.realpath(entry.path) if entry.is_symlink() else entry.path)
                      for rel, entry in _capped(walk(target)) if entry.is_file() and inside(root, entry))
    else:
        name = target.relative_to(root).as_posix()
        candidates = (item for item in [(name, target.name, str(target))])
    try:
        for rel, below, real in candidates:
            if time.monotonic() > deadline:
                found.stopped = f"it took over {SEARCH_SECONDS:g} s"
                break
            if include and not fnmatch(below if "/" in include else os.path.basename(below), include):
                continue
            try:
                size = os.path.getsize(real)
                if size > MAX_SEARCH_FILE_BYTES:
                    found.skipped_big += 1
                    continue
                if size > budget:
                    found.stopped = f"over {human_size(MAX_SEARCH_BYTES)} read"
                    break
                budget -= size
                with open_regular(real, root) as handle:
                    data = handle.read(MAX_SEARCH_FILE_BYTES + 1)
            except OSError:
                continue
            if looks_binary(data):
                continue
            if not _search_text(data.decode("utf-8", errors="replace"), rel, compiled, found, deadline, limit):
                found.stopped = f"the pattern took over {SEARCH_SECONDS:g} s"
                break
    except _TooMany:
        found.stopped = f"over {MAX_WALK_ENTRIES:,} files and folders looked at"
    return found


def _capped(entries: Iterator[tuple[str, os.DirEntry[str]]]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    for seen, item in enumerate(entries):
        if seen == MAX_WALK_ENTRIES:
            raise _TooMany
        yield item


class _TooMany(Exception):
    """The walk passed ``MAX_WALK_ENTRIES``."""


def _search_text(text: str, rel: str, compiled: regex.Pattern[str], found: _Found, deadline: float,
                 limit: int) -> bool:
    """Add the file's matching lines (one entry per line); False when the deadline passed."""
    number, pos, last = 1, 0, 0
    try:
        for match in compiled.finditer(text, timeout=max(0.001, deadline - time.monotonic())):
            at = match.start()
            number += text.count("\n", pos, at)
            pos = at
            if number == last:
                continue
            last = number
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            line = text[start:end if end != -1 else len(text)].rstrip("\r")
            found.add(rel, number, line, at - start, limit)
    except TimeoutError:
        return False
    return True


def _around(line: str, at: int) -> str:
    """The line, cut to ``MAX_MATCH_LINE_CHARS`` around the match start when longer."""
    line = line.strip() if len(line) <= MAX_MATCH_LINE_CHARS else line
    if len(line) <= MAX_MATCH_LINE_CHARS:
        return line
    start = max(0, min(at - MAX_MATCH_LINE_CHARS // 3, len(line) - MAX_MATCH_LINE_CHARS))
    head = "…" if start else ""
    tail = "…" if start + MAX_MATCH_LINE_CHARS < len(line) else ""
    return f"{head}{line[start:start + MAX_MATCH_LINE_CHARS]}{tail}"
