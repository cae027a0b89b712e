"""Memory files cut into passages, and their ranking by words (BM25) and by meaning (cosine),
fused by reciprocal rank: the pure half of memory search, tested with tables.

A passage is a heading's section (``#`` ... lines start one), cut at blank lines into pieces of
about ``MAX_CHARS``; a paragraph longer than that is cut at ``MAX_LINES`` lines. It keeps its
file, lines and heading; what is embedded is the heading and the text (``embedded_text``), and
its ``hash`` says when that changed.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.tools.memory import tokenize

MAX_CHARS = 1200
MAX_LINES = 40
RRF_K = 60  # the usual constant of reciprocal rank fusion
BM25_K1 = 1.2
BM25_B = 0.75
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True, slots=True)
class Passage:
    """Lines ``start``..``end`` (1-based, inclusive) of memory file ``path``, under ``heading``."""

    path: str
    start: int
    end: int
    heading: str
    text: str
    hash: str = field(default="", compare=False)

    @property
    def source(self) -> str:
        return f"{self.path}:{self.start}-{self.end}"


def embedded_text(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading and not text.lstrip().startswith("#") else text


def cut(path: str, lines: Sequence[str]) -> list[Passage]:
    """The passages of one file's lines."""
    found: list[Passage] = []
    heading = ""
    piece: list[tuple[int, str]] = []
    size = 0

    def close() -> None:
        nonlocal size
        while piece and not piece[-1][1].strip():
            piece.pop()
        if any(line.strip() for _, line in piece):
            text = "\n".join(line for _, line in piece)
            digest = hashlib.sha256(embedded_text(heading, text).encode()).hexdigest()
            found.append(Passage(path, piece[0][0], piece[-1][0], heading, text, digest))
        piece.clear()
        size = 0

    for number, line in enumerate(lines, 1):
        if (m := _HEADING.match(line)) is not None:
            close()
            heading = m.group(2)
        elif not line.strip():
            if size >= MAX_CHARS:
                close()
            elif piece:
                piece.append((number, line))
            continue
        elif len(piece) >= MAX_LINES:
            close()
        piece.append((number, line))
        size += len(line) + 1
    close()
    return found


class WordIndex:
    """BM25 over passages. Each word's postings and their length-normalised term weights are worked
    out once, so a search costs an array addition per word of the query (numpy)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        import numpy as np

        counts = [Counter(tokenize(embedded_text(p.heading, p.text))) for p in passages]
        lengths = [sum(c.values()) for c in counts]
        average = (sum(lengths) / len(lengths)) if lengths else 1.0
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, (found, length) in enumerate(zip(counts, lengths, strict=True)):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * length / (average or 1.0))
            for term, f in found.items():
                ids, weights = postings.setdefault(term, ([], []))
                ids.append(i)
                weights.append(f * (BM25_K1 + 1) / (f + norm))
        self.size = len(passages)
        self.postings = {term: (np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64))
                         for term, (ids, weights) in postings.items()}

    def rank(self, query: str, limit: int) -> list[int]:
        """Indexes of the ``limit`` best passages for ``query``'s words, best first (only those with one)."""
        import numpy as np

        scores = np.zeros(self.size)
        for term in set(tokenize(query)):
            if (found := self.postings.get(term)) is None:
                continue
            ids, weights = found
            idf = math.log(1 + (self.size - len(ids) + 0.5) / (len(ids) + 0.5))
            scores[ids] += idf * weights
        hit = np.flatnonzero(scores > 0)
        if not len(hit):
            return []
        k = min(limit, len(hit))
        top = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        return [int(i) for i in sorted(top, key=lambda i: (-scores[i], i))]


def fuse(rankings: Sequence[Sequence[int]], limit: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each ranking gives ``1 / (RRF_K + rank)``; best first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
