"""Split a rendered answer into messages of the size a platform takes (its ``MessageShape``).

Pure functions. The splitter cuts the dialect's ``Atom``s of a rendered answer
(``bot.outbound.markdown.render_atoms``) only between atoms, so a split never falls inside
a tag, an entity, an escape, a surrogate pair or a markup token. ``MessageShape.measure``
says what a message's length is: UTF-16 units of the visible text (Telegram: markup is
free) or characters as sent (Slack, Discord: markup counts).

Each chunk takes as much as fits and then backs off to the best break in that window: a
blank line, else a line break, else a sentence end, else a space, else it cuts where it
must; with ``MessageShape.max_lines`` the window also ends after that many lines. A chunk
does not end on a heading cut off from its section. Formatting open at a break is closed at
the end of the chunk and reopened, the same (a link's address, a fence's language), at the
start of the next one.
"""

from __future__ import annotations

import bisect
from itertools import accumulate

from bot.channels import Atom, Dialect, Mark, Measure, MessageShape
from bot.outbound.markdown import plain_line, render_atoms

__all__ = ["measure", "render_chunks", "split", "too_many", "utf16_len"]

_Stack = tuple[Atom, ...]  # open formatting, outermost first
_BREAKS: tuple[tuple[str, ...], ...] = (("\n\n",), ("\n",), (". ", "! ", "? "), (" ",))


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: characters outside the BMP count two."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def measure(atoms: list[Atom], shape: MessageShape) -> int:
    """A rendered message's length as the platform counts it."""
    if shape.measure is Measure.UTF16:
        return sum(utf16_len(atom.char) for atom in atoms)
    return sum(len(atom.raw) for atom in atoms)


def too_many(chunks: list[str], shape: MessageShape) -> bool:
    """Too many messages to read comfortably: send the answer as a .md file instead."""
    return len(chunks) > shape.max_chunks


def render_chunks(markdown: str, dialect: Dialect, shape: MessageShape) -> list[str]:
    """Render model Markdown in ``dialect`` and split it into messages of ``shape``."""
    line = plain_line(markdown)
    if line and 2 * len(line) <= shape.chunk and dialect.verbatim(line):  # short text, as it is (2: UTF-16's bound)
        return [line]
    return split(render_atoms(markdown, dialect), dialect, shape)


def split(atoms: list[Atom], dialect: Dialect, shape: MessageShape) -> list[str]:
    """Split rendered ``atoms`` into well-formed chunks of at most ``shape.chunk`` units.

    Returns no chunks when the text holds nothing visible.
    """
    if shape.chunk < 2:
        raise ValueError("limit must be at least 2 units (one emoji)")
    return _Splitter(atoms, shape, dialect).chunks()


class _Splitter:
    def __init__(self, atoms: list[Atom], shape: MessageShape, dialect: Dialect) -> None:
        self.atoms = atoms
        self.dialect = dialect
        self.limit = shape.chunk
        self.max_lines = shape.max_lines
        self.chars = shape.measure is not Measure.UTF16  # markup counts, as sent
        chars = [atom.char for atom in atoms]
        if self.chars:
            units = [len(atom.raw) for atom in atoms]
        else:
            lengths = {char: utf16_len(char) for char in set(chars)}
            units = [lengths[char] for char in chars]
        self.ends = list(accumulate(units, initial=0))  # units in atoms[:k]
        self.text_ends = list(accumulate((len(atom.raw) if atom.char else 0 for atom in atoms), initial=0)) \
            if self.chars else self.ends  # the same, counting text only
        self.plain = "".join(chars)
        self.text_at = [index for index, char in enumerate(chars) if char]  # atom of each plain char
        if len(self.text_at) != len(self.plain):  # some atoms show more than one character
            self.text_at = [index for index, char in enumerate(chars) for _ in char]
        self.text_before = list(accumulate(map(len, chars), initial=0))  # plain chars in atoms[:k]
        self.stacks = _stacks(atoms)

    def chunks(self) -> list[str]:
        atoms = self.atoms
        chunks: list[str] = []
        start = 0
        while start < len(atoms):
            chunk, cut = self.one(start)
            if chunk:
                chunks.append(chunk)
            start = cut
        return chunks

    def one(self, start: int) -> tuple[str, int]:
        """The chunk that starts at ``atoms[start]`` and the index where the next one starts."""
        atoms, stack = self.atoms, self.stacks[start]
        budget = self.limit - (sum(len(atom.raw) for atom in stack) if self.chars else 0)
        first_text = start
        while first_text < len(atoms) and not atoms[first_text].char:
            first_text += 1
        while True:
            stop = max(bisect.bisect_right(self.ends, self.ends[start] + budget) - 1, first_text + 1)
            cut = self.cut(start, stop)
            chunk = _assemble(_line_start(_reopened(stack, atoms[start:cut]), self.dialect))
            over = len(chunk) - self.limit if self.chars else 0
            if over <= 0:
                return chunk, cut
            if stop <= first_text + 1:  # not one unit fits with its formatting: text without markup
                stop = max(bisect.bisect_right(self.text_ends, self.text_ends[start] + self.limit) - 1, first_text + 1)
                cut = self.cut(start, stop)
                return "".join(atom.raw for atom in atoms[start:cut] if atom.char).strip(), cut
            budget -= over

    def cut(self, start: int, stop: int) -> int:
        """Where the chunk from ``start`` ends, at most at ``stop``: the best break before it."""
        stop = self.line_cap(start, stop)
        if stop >= len(self.atoms):
            return len(self.atoms)
        best = self.best_cut(self.text_before[start], self.text_before[stop])
        return _settle(self.atoms, stop if best is None else best, start)

    def line_cap(self, start: int, stop: int) -> int:
        """``stop`` brought back so that the chunk, as sent, holds at most ``max_lines`` lines
        (the newlines of reopened and closing fences count: they are lines on screen)."""
        if self.max_lines is None:
            return stop
        atoms, stacks = self.atoms, self.stacks
        lines = 1 + sum(atom.raw.count("\n") for atom in stacks[start])
        at, end = start, min(stop, len(atoms))
        while at < end and atoms[at].char.isspace():  # whitespace is trimmed at the start
            at += 1
        while at < end:
            if "\n" in atoms[at].raw:
                more = atoms[at].raw.count("\n")
                closing = sum(atom.close.count("\n") for atom in stacks[at])
                if atoms[at].mark is Mark.OPEN:  # a fence that opens here closes on a line of its own too
                    closing += atoms[at].close.count("\n")
                # a closing fence's line was counted as closing already, at the newline before it
                if atoms[at].mark is not Mark.CLOSE and lines + more + closing > self.max_lines:
                    return max(at, start + 1)  # cut before the newline that starts one line too many
                lines += more
            at += 1
        return stop

    def best_cut(self, lo: int, hi: int) -> int | None:
        """Atom index just after the best break in plain[lo:hi], or None to cut hard.

        A break only counts when visible text precedes it in the window, so that every chunk
        carries something, and when the chunk would not end on a heading cut off from its
        section. Its whitespace may run past the window: it is trimmed anyway.
        """
        plain, text_at = self.plain, self.text_at
        first = lo
        while first < hi and plain[first].isspace():
            first += 1
        for separators in _BREAKS:
            width = len(separators[0])
            slack = width - len(separators[0].rstrip())
            end = hi + slack
            while (found := max(plain.rfind(sep, first, end) for sep in separators)) > first:
                if not self.ends_with_heading(first, found + width - slack):
                    return text_at[found + width - 1] + 1  # just after the break's last character
                end = found + width - 1
        return None

    def ends_with_heading(self, first: int, end: int) -> bool:
        """Is plain[first:end] a block of text whose last block is a heading (a bold line)?"""
        plain, text_at, atoms = self.plain, self.text_at, self.atoms
        while end > first and plain[end - 1].isspace():
            end -= 1
        line = max(first, plain.rfind("\n", first, end) + 1)
        if end <= line or not (line == first or plain.endswith("\n\n", first, line)):
            return False
        before, after = text_at[line] - 1, text_at[end - 1] + 1
        if before < 0:
            return False
        if atoms[before].mark is Mark.PREFIX:
            return atoms[before].tag == "h"
        if atoms[before].tag != "b" or atoms[before].mark is not Mark.OPEN:
            return False
        while after < len(atoms) and atoms[after].mark is Mark.CLOSE:
            if atoms[after].tag == "b":
                return True
            after += 1
        return False


def _stacks(atoms: list[Atom]) -> list[_Stack]:
    """stacks[k]: the formatting open just before atoms[k] (one more entry for the end)."""
    stacks: list[_Stack] = []
    stack: _Stack = ()
    for atom in atoms:
        stacks.append(stack)
        if atom.mark:
            stack = _apply(stack, atom)
    stacks.append(stack)
    return stacks


def _apply(stack: _Stack, atom: Atom) -> _Stack:
    if atom.mark is Mark.OPEN:
        return (*stack, atom)
    if atom.mark is Mark.CLOSE:
        for depth in range(len(stack) - 1, -1, -1):  # lenient: close up to the matching tag
            if stack[depth].tag == atom.tag:
                return stack[:depth]
    return stack


def _settle(atoms: list[Atom], cut: int, start: int) -> int:
    """Move a cut so closing markup stays behind it and opening markup goes ahead of it."""
    while cut < len(atoms) and atoms[cut].mark is Mark.CLOSE:
        cut += 1
    while cut - 1 > start and atoms[cut - 1].mark in (Mark.OPEN, Mark.PREFIX):
        cut -= 1
    return cut


def _assemble(atoms: list[Atom]) -> str:
    """Reopened markup + the chunk's atoms, trimmed, empty pairs dropped, open markup closed."""
    kept = _trim(atoms)
    out: list[Atom] = []
    stack: _Stack = ()
    for atom in kept:
        if atom.mark is Mark.CLOSE and out and out[-1].tag == atom.tag and out[-1].mark is Mark.OPEN:
            out.pop()  # an empty pair, e.g. formatting that opened right at the cut
        else:
            out.append(atom)
        if atom.mark:
            stack = _apply(stack, atom)
    while out and out[-1].mark in (Mark.OPEN, Mark.PREFIX):
        if out[-1].mark is Mark.OPEN:
            stack = stack[:-1]
        out.pop()
    if not any(atom.char for atom in out):
        return ""
    return "".join(atom.raw for atom in out) + "".join(atom.close for atom in reversed(stack))


def _reopened(stack: _Stack, body: list[Atom]) -> list[Atom]:
    """The chunk's atoms with the formatting open at its start reopened after its leading
    line prefixes: a quote's "> " or a heading's "# " only counts at the start of a line."""
    lead = 0
    while lead < len(body) and (body[lead].mark is Mark.PREFIX or not body[lead].mark and body[lead].char.isspace()):
        lead += 1
    while lead and body[lead - 1].mark is not Mark.PREFIX:
        lead -= 1
    return [*body[:lead], *stack, *body[lead:]]


def _line_start(atoms: list[Atom], dialect: Dialect) -> list[Atom]:
    """A chunk starts a line: its first text, when it is a character that would open a block
    there (Discord's ``# h`` cut from the middle of ``a # h``), is escaped as the dialect
    escapes a line's start. Real headings and quotes are prefix atoms, not text."""
    if not dialect.block_openers:
        return atoms
    for index, atom in enumerate(atoms):
        if atom.mark is Mark.PREFIX or atom.tag in ("pre", "code"):  # a real block, or code: as it is
            return atoms
        if atom.mark or atom.char.isspace():
            continue
        if atom.char in dialect.block_openers and atom.raw == atom.char:
            return [*atoms[:index], *dialect.text(atom.char), *atoms[index + 1:]]
        return atoms
    return atoms


def _trim(atoms: list[Atom]) -> list[Atom]:
    """Drop whitespace at both ends of the text, looking through markup.

    At the start, inside a code block only line breaks go: a code line keeps its indentation.
    """
    drop: set[int] = set()
    in_pre = 0
    for index, atom in enumerate(atoms):
        if atom.mark:
            if atom.tag == "pre":
                in_pre += 1 if atom.mark is Mark.OPEN else -1 if atom.mark is Mark.CLOSE else 0
            continue
        if not atom.char.isspace() or (in_pre > 0 and atom.char not in "\r\n"):
            break
        drop.add(index)
    for index in range(len(atoms) - 1, -1, -1):
        atom = atoms[index]
        if atom.mark:
            continue
        if not atom.char.isspace():
            break
        drop.add(index)
    return [atom for index, atom in enumerate(atoms) if index not in drop]
