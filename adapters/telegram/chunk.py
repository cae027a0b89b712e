"""Split rendered Telegram HTML into messages that each fit Telegram's length limit.

Pure functions. Telegram counts a message's length in UTF-16 code units of its text
after entity parsing: tags count nothing, ``&lt;`` counts one, 😀 counts two.

The HTML is read as a list of atoms: a tag, or one unit of text (a code point or a whole
entity), so a split can never fall inside a tag, an entity or a surrogate pair. Each chunk
takes as much text as fits and then backs off to the best break in that window: a blank
line, else a line break, else a sentence end, else a space, else it cuts where it must.
Formatting open at a break is closed at the end of the chunk and reopened, with the same
attributes, at the start of the next one.
"""

from __future__ import annotations

import bisect
import html
import re
from itertools import accumulate
from typing import NamedTuple

__all__ = ["TELEGRAM_LIMIT", "chunk_html", "should_send_as_file", "text_length", "utf16_len"]

TELEGRAM_LIMIT = 4096
MAX_CHUNKS = 8

_PIECES = re.compile(r"<[^>]*>|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);|[^<&]+|[<&]")
_TAG_NAME = re.compile(r"</?\s*([a-zA-Z][a-zA-Z0-9-]*)")
_BREAKS: tuple[tuple[str, ...], ...] = (("\n\n",), ("\n",), (". ", "! ", "? "), (" ",))


class _Atom(NamedTuple):
    raw: str  # as it appears in the HTML
    char: str  # the text it stands for ("" for a tag)
    units: int  # UTF-16 code units Telegram counts
    tag: str  # lower-case tag name ("" for text)
    opening: bool


_Stack = tuple[_Atom, ...]  # the open tags, outermost first


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: characters outside the BMP count two."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def text_length(html_text: str) -> int:
    """Length of the HTML's text as Telegram counts it (tags free, entities one char)."""
    return sum(atom.units for atom in _atoms(html_text))


def should_send_as_file(chunks: list[str], max_chunks: int = MAX_CHUNKS) -> bool:
    """Too many messages to read comfortably: send the answer as a file instead."""
    return len(chunks) > max_chunks


def chunk_html(html_text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split well-formed Telegram HTML into well-formed chunks of at most ``limit`` units.

    Returns no chunks when the HTML holds no visible text.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 units (one emoji)")
    atoms = _atoms(html_text)
    stacks = _stacks(atoms)
    ends = list(accumulate((atom.units for atom in atoms), initial=0))  # units in atoms[:k]
    text_at = [index for index, atom in enumerate(atoms) if atom.units]  # atom of each plain char
    text_before = list(accumulate((atom.units > 0 for atom in atoms), initial=0))  # plain chars in atoms[:k]
    plain = "".join(atom.char for atom in atoms)

    chunks: list[str] = []
    start = 0
    while start < len(atoms):
        stop = bisect.bisect_right(ends, ends[start] + limit) - 1
        if stop >= len(atoms):
            cut = len(atoms)
        else:
            best = _best_cut(plain, text_at, atoms, text_before[start], text_before[stop])
            cut = _settle(atoms, stop if best is None else best, start)
        chunk = _assemble(list(stacks[start]) + atoms[start:cut])
        if chunk:
            chunks.append(chunk)
        start = cut
    return chunks


# --- reading the HTML ------------------------------------------------------------------

def _atoms(html_text: str) -> list[_Atom]:
    atoms: list[_Atom] = []
    chars: dict[str, _Atom] = {}  # one atom per distinct character: far fewer objects
    for match in _PIECES.finditer(html_text):
        piece = match.group(0)
        if piece.startswith("<") and piece.endswith(">") and len(piece) > 2:
            name = _TAG_NAME.match(piece)
            if name is not None:
                opening = not piece.startswith("</")
                atoms.append(_Atom(piece, "", 0, name.group(1).lower(), opening))
                continue
        if piece.startswith("&") and len(piece) > 1:
            char = html.unescape(piece)
            if len(char) == 1:  # else not an entity Telegram knows: leave it as text
                atoms.append(_Atom(piece, char, utf16_len(char), "", False))
                continue
        for char in piece:
            atom = chars.get(char)
            if atom is None:
                atom = chars[char] = _Atom(char, char, 2 if ord(char) > 0xFFFF else 1, "", False)
            atoms.append(atom)
    return atoms


def _stacks(atoms: list[_Atom]) -> list[_Stack]:
    """stacks[k]: the tags open just before atoms[k] (one more entry for the end)."""
    stacks: list[_Stack] = []
    stack: _Stack = ()
    for atom in atoms:
        stacks.append(stack)
        if atom.tag:
            stack = _apply(stack, atom)
    stacks.append(stack)
    return stacks


def _apply(stack: _Stack, atom: _Atom) -> _Stack:
    if not atom.tag:
        return stack
    if atom.opening:
        return (*stack, atom)
    for depth in range(len(stack) - 1, -1, -1):  # lenient: close up to the matching tag
        if stack[depth].tag == atom.tag:
            return stack[:depth]
    return stack


# --- choosing where to cut -------------------------------------------------------------

def _best_cut(plain: str, text_at: list[int], atoms: list[_Atom], lo: int, hi: int) -> int | None:
    """Atom index just after the best break in plain[lo:hi], or None to cut hard.

    A break only counts when visible text precedes it in the window, so that every chunk
    carries something, and when the chunk would not end on a heading cut off from its
    section. Its whitespace may run past the window: it is trimmed anyway.
    """
    first = lo
    while first < hi and plain[first].isspace():
        first += 1
    for separators in _BREAKS:
        width = len(separators[0])
        slack = width - len(separators[0].rstrip())
        end = hi + slack
        while (found := max(plain.rfind(sep, first, end) for sep in separators)) > first:
            if not _ends_with_heading(plain, text_at, atoms, first, found + width - slack):
                return text_at[found + width - 1] + 1  # just after the break's last character
            end = found + width - 1
    return None


def _ends_with_heading(plain: str, text_at: list[int], atoms: list[_Atom], first: int, end: int) -> bool:
    """Is plain[first:end] a block of text whose last block is one bold line (a heading)?"""
    while end > first and plain[end - 1].isspace():
        end -= 1
    line = max(first, plain.rfind("\n", first, end) + 1)
    if end <= line or not (line == first or plain.endswith("\n\n", first, line)):
        return False
    before, after = text_at[line] - 1, text_at[end - 1] + 1
    if before < 0 or atoms[before].tag != "b" or not atoms[before].opening:
        return False
    while after < len(atoms) and atoms[after].tag and not atoms[after].opening:
        if atoms[after].tag == "b":
            return True
        after += 1
    return False


def _settle(atoms: list[_Atom], cut: int, start: int) -> int:
    """Move a cut so closing tags stay behind it and opening tags go ahead of it."""
    while cut < len(atoms) and atoms[cut].tag and not atoms[cut].opening:
        cut += 1
    while cut - 1 > start and atoms[cut - 1].tag and atoms[cut - 1].opening:
        cut -= 1
    return cut


# --- writing a chunk -------------------------------------------------------------------

def _assemble(atoms: list[_Atom]) -> str:
    """Reopened tags + the chunk's atoms, trimmed, empty tags dropped, open tags closed."""
    kept = _trim(atoms)
    out: list[_Atom] = []
    stack: _Stack = ()
    for atom in kept:
        if atom.tag and not atom.opening and out and out[-1].tag == atom.tag and out[-1].opening:
            out.pop()  # an empty pair, e.g. formatting that opened right at the cut
        else:
            out.append(atom)
        stack = _apply(stack, atom)
    while out and out[-1].tag and out[-1].opening:
        stack = stack[:-1]
        out.pop()
    if not any(atom.units for atom in out):
        return ""
    return "".join(atom.raw for atom in out) + "".join(f"</{atom.tag}>" for atom in reversed(stack))


def _trim(atoms: list[_Atom]) -> list[_Atom]:
    """Drop whitespace at both ends of the text, looking through tags.

    At the start, inside ``pre`` only line breaks go: a code line keeps its indentation.
    """
    drop: set[int] = set()
    in_pre = 0
    for index, atom in enumerate(atoms):
        if atom.tag:
            in_pre += (1 if atom.opening else -1) if atom.tag == "pre" else 0
            continue
        if not atom.char.isspace() or (in_pre > 0 and atom.char not in "\r\n"):
            break
        drop.add(index)
    for index in range(len(atoms) - 1, -1, -1):
        atom = atoms[index]
        if atom.tag:
            continue
        if not atom.char.isspace():
            break
        drop.add(index)
    return [atom for index, atom in enumerate(atoms) if index not in drop]
