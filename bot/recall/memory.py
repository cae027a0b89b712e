"""Memory by meaning: a workspace's memory files as passages, their vectors in the database, and
``memory_search`` by words and meaning (BM25 and cosine, fused by reciprocal rank).

Per workspace (its folder name), the passages of ``MEMORY.md`` and ``memory/*.md`` are kept in
the process while the files' sizes and times stay the same; when they change, the files are cut
again and only passages whose text is new (by hash, for this model) are embedded: a vector is
found again in the database after a restart, or when a passage only moved. The embedding calls
are charged to the run's payers, as model calls are (stored charges: the budgets count them).
Without ``memory.embeddings`` the same index ranks by words only (auto-recall uses it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.limits import PersonLimits, split
from bot.recall.embeddings import EmbeddingError, Embeddings
from bot.recall.passages import Passage, WordIndex, cut, embedded_text, fuse
from bot.store.op import Op, execute, many, rows
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.memory import MAX_MEMORY_FILE_BYTES, MAX_RESULTS, memory_files, snippet
from bot.tools.paths import looks_binary, open_regular

if TYPE_CHECKING:
    import numpy as np

    from bot.store.schema_steps import StepStore

log = logging.getLogger(__name__)

CANDIDATES = 50  # of each ranking, fused
DEFAULT_RESULTS = 5
_SIGNATURE = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class Found:
    passage: Passage
    score: float
    how: str  # "words", "meaning" or "words and meaning"


@dataclass(slots=True)
class _Workspace:
    signature: _SIGNATURE
    passages: list[Passage]
    words: WordIndex
    model: str = ""
    matrix: np.ndarray[Any, Any] | None = None  # one unit row per passage (zeros: none)
    vectors: dict[str, bytes] | None = None  # hash -> float32 bytes


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom embedding calls are charged to, and the run they are for."""

    people: tuple[str, ...]
    run_id: str


def _stored(workspace: str, model: str) -> Op[dict[str, bytes]]:
    found = yield from rows("SELECT hash, vector FROM recall_passages WHERE workspace = ? AND model = ?"
                            " AND vector IS NOT NULL", workspace, model)
    return {str(r[0]): bytes(r[1]) for r in found}


def _replace(workspace: str, model: str, passages: Sequence[Passage], vectors: dict[str, bytes],
             now: float) -> Op[None]:
    yield from execute("DELETE FROM recall_passages WHERE workspace = ?", workspace)
    yield from many("INSERT INTO recall_passages (workspace, path, start_line, end_line, heading, hash, model, vector,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(workspace, p.path, p.start, p.end, p.heading, p.hash, model, vectors.get(p.hash), now)
                     for p in passages])


def _charge(charges: Sequence[Any], run_id: str, now: float) -> Op[None]:
    yield from many("INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES (?, ?, ?, ?, ?)",
                    [(c.person, run_id, c.tokens, c.cost, now) for c in charges])


def _read_passages(root: Path) -> tuple[_SIGNATURE, list[Passage]]:
    """The memory files' passages (blocking: run in a thread)."""
    signature: list[tuple[str, int, int]] = []
    passages: list[Passage] = []
    for rel, real in memory_files(root):
        try:
            st = os.stat(real)
            if st.st_size > MAX_MEMORY_FILE_BYTES:
                continue
            with open_regular(real, root) as handle:
                data = handle.read(MAX_MEMORY_FILE_BYTES)
        except OSError:
            continue
        signature.append((rel, st.st_size, st.st_mtime_ns))
        if not looks_binary(data):
            passages += cut(rel, data.decode("utf-8", errors="replace").splitlines())
    return tuple(signature), passages


def _signature(root: Path) -> _SIGNATURE:
    found: list[tuple[str, int, int]] = []
    for rel, real in memory_files(root):
        try:
            st = os.stat(real)
        except OSError:
            continue
        if st.st_size <= MAX_MEMORY_FILE_BYTES:
            found.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(found)


def unit(vector: Sequence[float]) -> bytes:
    """A vector as stored: float32, unit length."""
    import numpy as np

    v = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(v))
    return (v / norm if norm else v).astype("<f4").tobytes()


def matrix_of(passages: Sequence[Passage], vectors: dict[str, bytes]) -> np.ndarray[Any, Any] | None:
    import numpy as np

    rows_ = [vectors.get(p.hash) for p in passages]
    size = next((len(v) for v in rows_ if v is not None), 0)
    if not size:
        return None
    zero = bytes(size)
    return np.frombuffer(b"".join(v if v is not None and len(v) == size else zero for v in rows_),
                         dtype="<f4").reshape(len(passages), size // 4)


def nearest(matrix: np.ndarray[Any, Any], query: bytes, limit: int) -> list[int]:
    """Rows of ``matrix`` by cosine to ``query`` (unit vectors: a dot product), best first."""
    import numpy as np

    q = np.frombuffer(query, dtype="<f4")
    if q.shape[0] != matrix.shape[1]:
        return []
    scores = matrix @ q
    k = min(limit, scores.shape[0])
    top = np.argpartition(-scores, k - 1)[:k]
    return [int(i) for i in top[np.argsort(-scores[top], kind="stable")] if scores[i] > 0]


class MemoryIndex:
    """Memory passages per workspace, searched by words and (with embeddings) meaning."""

    def __init__(self, store: StepStore, embeddings: Embeddings | None, limits: PersonLimits | None = None) -> None:
        self._store = store
        self._embeddings = embeddings
        self._limits = limits
        self._cache: dict[str, _Workspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.embedded = 0  # passages embedded by this process (tests, bench)

    @property
    def hybrid(self) -> bool:
        return self._embeddings is not None

    async def workspace(self, name: str, root: Path, payer: Payer) -> _Workspace:
        """The workspace's passages, read again and embedded only where its files changed."""
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            cached = self._cache.get(name)
            if cached is not None and cached.signature == await asyncio.to_thread(_signature, root):
                return cached
            signature, passages = await asyncio.to_thread(_read_passages, root)
            found = _Workspace(signature, passages, WordIndex(passages))
            if self._embeddings is not None:
                try:
                    await self._vectors(name, found, cached, payer)
                except EmbeddingError as exc:
                    log.warning("memory of %s not embedded: %s", name, exc)
                    return found  # not cached: embedded at the next search
            self._cache[name] = found
            return found

    async def _vectors(self, name: str, found: _Workspace, before: _Workspace | None, payer: Payer) -> None:
        assert self._embeddings is not None
        model = self._embeddings.name
        have = dict(before.vectors or {}) if before is not None and before.model == model else {}
        if not have:
            have.update(await self._store.read(_stored(name, model)))
        kept = set(have)  # what the database holds now
        wanted = {p.hash: embedded_text(p.heading, p.text) for p in found.passages}
        missing = [h for h in wanted if h not in have]
        if missing:
            made, tokens = await self._embeddings.embed([wanted[h] for h in missing])
            await self._charge(payer, tokens)
            have.update((h, unit(v)) for h, v in zip(missing, made, strict=True))
            self.embedded += len(missing)
            log.info("memory of %s: %d passages embedded, %d kept", name, len(missing), len(wanted) - len(missing))
        vectors = {h: have[h] for h in wanted}
        if missing or kept != set(wanted):
            await self._store.write(_replace(name, model, found.passages, vectors, time.time()))
        found.model, found.vectors, found.matrix = model, vectors, matrix_of(found.passages, vectors)

    async def _charge(self, payer: Payer, tokens: int) -> None:
        assert self._embeddings is not None
        charges = split(payer.people, tokens, tokens * self._embeddings.cost_per_token)
        if not charges:
            return
        await self._store.write(_charge(charges, f"{payer.run_id}-embeddings", time.time()))
        if self._limits is not None:
            self._limits.charge(charges)

    async def search(self, name: str, root: Path, query: str, limit: int, payer: Payer) -> tuple[list[Found], str]:
        """The best passages for ``query``, and a note ("" or why meaning was not used)."""
        ws = await self.workspace(name, root, payer)
        words = ws.words.rank(query, CANDIDATES)
        meaning: list[int] = []
        note = ""
        if self._embeddings is not None:
            if ws.matrix is None and ws.passages:
                note = "[searched by words only: memory could not be embedded now]"
            elif ws.matrix is not None:
                try:
                    vectors, tokens = await self._embeddings.embed([query])
                    await self._charge(payer, tokens)
                    meaning = nearest(ws.matrix, unit(vectors[0]), CANDIDATES)
                except EmbeddingError as exc:
                    note = f"[searched by words only: {exc}]"
        ranked = fuse([words, meaning], limit) if meaning else [(i, 0.0) for i in words[:limit]]
        in_words, in_meaning = set(words), set(meaning)
        return [Found(ws.passages[i], score, " and ".join(how for how, ok in (("words", i in in_words),
                                                                              ("meaning", i in in_meaning)) if ok))
                for i, score in ranked], note

    def tool(self) -> Tool:
        """``memory_search`` by words and meaning (in place of the built-in one)."""
        index = self

        @tool(category=ToolCategory.FILE, name="memory_search")
        async def memory_search(ctx: ToolContext, query: str, max_results: int = DEFAULT_RESULTS) -> str:
            """Search your memory (MEMORY.md and memory/*.md) by words and by meaning: a question or a
            paraphrase finds notes that use other words. The best passages come first, with their file
            and line numbers (memory_get reads more around them).

            Args:
                query: What to look for, e.g. `Alice birthday` or `where is the party this spring`.
                max_results: How many passages to return (up to 20).
            """
            if not 1 <= max_results <= MAX_RESULTS:
                raise ToolError(f"max_results must be between 1 and {MAX_RESULTS}")
            if not query.strip():
                raise ToolError("the query is empty; say what to look for")
            root = Path(os.path.realpath(ctx.workspace))
            found, note = await index.search(ctx.conversation.workspace, root, query, max_results,
                                             Payer(ctx.payers, ctx.run_id))
            return shown(found, query, note)

        return memory_search


def shown(found: Sequence[Found], query: str, note: str = "") -> str:
    if not found:
        return "\n".join(x for x in (f"Nothing in memory matches {query!r}.", note) if x)
    parts = [f"{f.passage.source} (by {f.how}){' under ' + repr(f.passage.heading) if f.passage.heading else ''}\n"
             f"{snippet(f.passage.start, f.passage.text)}" for f in found]
    return "\n\n".join([*parts, *([note] if note else [])])
