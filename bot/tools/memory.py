"""Memory tools: ranked keyword search over the workspace's memory, and reading it by range.

Memory is ``MEMORY.md`` (lasting facts) and the Markdown files under ``memory/`` (daily
notes such as ``memory/2026-11-23.md``, which the memory flush writes). ``memory_search``
cuts every file into passages (a paragraph, a heading with its paragraph, at most
``PASSAGE_LINES`` lines), scores them against the query with BM25 over lightly stemmed
words, and prints the best passages with their line numbers; ``memory_get`` reads one
memory file, or a range of its lines, and nothing outside memory. A group's workspace is
its own, so in a group these tools see the group's memory, never a member's.

The ranking half is pure (``tokenize``, ``passages_of``, ``rank``) and tested with tables.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.tools.base import ToolCategory, ToolContext, ToolError, tool
from bot.tools.files import read_range
from bot.tools.paths import confined, human_size, inside, looks_binary, open_regular, walk, within, workspace_root
from bot.workspace import MEMORY_FILE

MEMORY_DIR = "memory"
PASSAGE_LINES = 12  # a longer paragraph is cut into windows of this many lines
DEFAULT_RESULTS = 5
MAX_RESULTS = 20
SNIPPET_CHARS = 800  # of one result's text
MAX_MEMORY_FILES = 1000
MAX_MEMORY_FILE_BYTES = 2 * 1024 * 1024  # bigger memory files are skipped, and said so
MAX_MEMORY_BYTES = 32 * 1024 * 1024  # read in one search, all files together
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"\w+", re.UNICODE)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_STOP_WORDS = frozenset("""
a an and are as at be but by did do does for from had has have he her his i if in into is it its me my
no not of on or our she so than that the their them then there these they this to was we were what when
where which who why will with you your
""".split())


# -- the pure half -----------------------------------------------------------------------

def stem(word: str) -> str:
    """A light English stemmer: plurals, then -ing / -ed (``meetings`` -> ``meet``)."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed words without stop words; digits count as words (dates, ids)."""
    return [stem(w) for w in _WORD.findall(text.casefold()) if w not in _STOP_WORDS and (len(w) > 1 or w.isdigit())]


@dataclass(frozen=True, slots=True)
class Passage:
    """Lines ``start``..``end`` (1-based, inclusive) of the memory file ``path``."""

    path: str
    start: int
    end: int
    text: str


def passages_of(path: str, lines: Sequence[str]) -> list[Passage]:
    """Paragraphs (blank lines end them; a heading starts a new one and stays with the text
    under it), cut into windows of at most ``PASSAGE_LINES`` lines."""
    passages: list[Passage] = []
    block: list[tuple[int, str]] = []

    def close() -> None:
        for i in range(0, len(block), PASSAGE_LINES):
            window = block[i:i + PASSAGE_LINES]
            passages.append(Passage(path, window[0][0], window[-1][0], "\n".join(line for _, line in window)))
        block.clear()

    for number, line in enumerate(lines, 1):
        if not line.strip() or _HEADING.match(line):
            close()
        if line.strip():
            block.append((number, line))
    close()
    return passages


def rank(passages: Sequence[Passage], query: str, limit: int) -> list[tuple[float, Passage]]:
    """The ``limit`` best passages for ``query`` by BM25, best first; ties go to newer files
    (``memory/2026-11-23.md`` before ``memory/2026-11-01.md``), then to earlier lines."""
    terms = set(tokenize(query))
    if not terms or not passages:
        return []
    counts = [Counter(tokenize(c.text)) for c in passages]
    lengths = [sum(c.values()) for c in counts]
    average = (sum(lengths) / len(lengths)) or 1.0
    total = len(passages)
    idf = {t: math.log(1 + (total - df + 0.5) / (df + 0.5))
           for t in terms if (df := sum(1 for c in counts if t in c))}
    scored: list[tuple[float, Passage]] = []
    for passage, tf, length in zip(passages, counts, lengths):
        score = 0.0
        for term, weight in idf.items():
            if f := tf.get(term):
                score += weight * f * (BM25_K1 + 1) / (f + BM25_K1 * (1 - BM25_B + BM25_B * length / average))
        if score > 0:
            scored.append((score, passage))
    order = {path: i for i, path in enumerate(sorted({c.path for c in passages}, key=_recency))}
    scored.sort(key=lambda sc: (-round(sc[0], 9), order[sc[1].path], sc[1].start))
    return scored[:limit]


def _recency(path: str) -> tuple[int, str]:
    """Dated notes newest first, then MEMORY.md, then the rest by name."""
    name = os.path.basename(path)
    if re.match(r"\d{4}-\d{2}-\d{2}", name):
        return 0, "".join(chr(0x10FFFF - ord(ch)) for ch in name)  # descending
    return (1, "") if path == MEMORY_FILE else (2, path)


def snippet(start: int, text: str) -> str:
    """Lines of a memory file from line ``start``, numbered like read_file, cut at ``SNIPPET_CHARS``."""
    out: list[str] = []
    used = 0
    for number, line in enumerate(text.split("\n"), start):
        if used + len(line) > SNIPPET_CHARS:
            out.append(f"{number:6}\t{line[:max(0, SNIPPET_CHARS - used)]}… [cut; memory_get shows the rest]")
            break
        out.append(f"{number:6}\t{line}")
        used += len(line)
    return "\n".join(out)


# -- the tools ---------------------------------------------------------------------------

@tool(category=ToolCategory.FILE)
async def memory_search(ctx: ToolContext, query: str, max_results: int = DEFAULT_RESULTS) -> str:
    """Search your memory (MEMORY.md and memory/*.md) for keywords; the best matching passages
    come first, with their file and line numbers (memory_get reads more around them).

    Args:
        query: Words to look for, e.g. `Alice birthday` or `project deadline`.
        max_results: How many passages to return (up to 20).
    """
    if not 1 <= max_results <= MAX_RESULTS:
        raise ToolError(f"max_results must be between 1 and {MAX_RESULTS}")
    if not tokenize(query):
        raise ToolError("the query has no words to search for; give a few keywords")
    return await asyncio.to_thread(_search, workspace_root(ctx), query, max_results)


def _search(root: Path, query: str, limit: int) -> str:
    passages: list[Passage] = []
    skipped: list[str] = []
    files = list(memory_files(root))
    budget = MAX_MEMORY_BYTES
    for rel, real in files:
        try:
            size = os.path.getsize(real)
            if size > MAX_MEMORY_FILE_BYTES or size > budget:
                skipped.append(rel)
                continue
            budget -= size
            with open_regular(real, root) as handle:
                data = handle.read(MAX_MEMORY_FILE_BYTES)
        except OSError:
            continue
        if not looks_binary(data):
            passages.extend(passages_of(rel, data.decode("utf-8", errors="replace").splitlines()))
    if not files:
        return "Memory is empty: there is no MEMORY.md and no memory/*.md yet."
    found = rank(passages, query, limit)
    notes = [f"[not searched (over {human_size(MAX_MEMORY_FILE_BYTES)} each or {human_size(MAX_MEMORY_BYTES)} in all): "
             f"{', '.join(skipped[:20])}{' ...' if len(skipped) > 20 else ''}]"] if skipped else []
    if not found:
        return "\n".join([f"Nothing in memory matches {query!r} ({len(files)} files searched).", *notes])
    parts = [f"{c.path}:{c.start}-{c.end} (score {score:.2f})\n{snippet(c.start, c.text)}" for score, c in found]
    return "\n\n".join([*parts, *notes])


def memory_files(root: Path) -> Iterable[tuple[str, str]]:
    """``(path relative to the workspace, real path)`` of MEMORY.md and memory/**/*.md that
    stay inside the workspace; at most ``MAX_MEMORY_FILES``."""
    count = 0
    top = root / MEMORY_FILE
    if top.is_file() and within(root, top):
        count += 1
        yield MEMORY_FILE, os.path.realpath(top)
    folder = root / MEMORY_DIR
    if not folder.is_dir() or not within(root, folder):
        return
    for rel, entry in walk(folder):
        if count >= MAX_MEMORY_FILES:
            return
        if entry.name.endswith(".md") and entry.is_file() and inside(root, entry):
            count += 1
            yield f"{MEMORY_DIR}/{rel}", os.path.realpath(entry.path)


@tool(category=ToolCategory.FILE)
async def memory_get(ctx: ToolContext, path: str = MEMORY_FILE, offset: int = 0, limit: int = 200) -> str:
    """Read a memory file (MEMORY.md or a file under memory/), whole or a range of lines, with
    line numbers; memory_search gives the file and lines to start from.

    Args:
        path: MEMORY.md or memory/<file>.md.
        offset: Number of lines to skip from the start (e.g. a search hit at line 40: offset=35).
        limit: Maximum number of lines to return.
    """
    if offset < 0:
        raise ToolError("offset must be 0 or more")
    if limit < 1:
        raise ToolError("limit must be at least 1")
    target = confined(ctx, path)
    if not _is_memory(ctx, target):
        raise ToolError(f"{path} is not memory: memory_get reads {MEMORY_FILE} and files under {MEMORY_DIR}/ "
                        "(read_file reads the rest of the workspace)")
    return await asyncio.to_thread(read_range, target, path, offset, limit, workspace_root(ctx))


def _is_memory(ctx: ToolContext, target: Path) -> bool:
    if target == confined(ctx, MEMORY_FILE):
        return True
    try:
        folder = confined(ctx, MEMORY_DIR)
    except ToolError:  # memory/ is a link that leads out: nothing under it is memory
        return False
    return folder in target.parents
