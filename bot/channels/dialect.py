"""A platform's message format, as the core's one Markdown walker needs it (STYLE habit 17).

The walker (``bot.outbound.markdown``) decides structure once for every platform; a
``Dialect`` supplies the atoms: how bold, a link, a code block, a quote ... are written and
how text is escaped. It writes them as ``Atom``s, the pieces the splitter
(``bot.outbound.split``) cuts between: markup that opens or closes formatting, a line
prefix, and units of text (a character, a whole escape, a mention). The rendered text is
the join of their ``raw``; nothing ever reads it back.

This is the port's side of the format, so that a platform package, which imports only the
port, can write its dialect: the interface with the defaults most dialects share
(``Dialect``), the atoms and the helpers that make them, and ``PLAIN`` (the terminal's, and
the fakes').
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import IntEnum
from typing import NamedTuple

__all__ = ["HR", "PLAIN", "Atom", "Dialect", "Mark", "PlainDialect", "quote_lines", "text_atoms", "wrap"]

HR = "———"  # a horizontal rule's line, where a dialect has no rule of its own


class Mark(IntEnum):  # what an atom is to the splitter: text, or markup of one of three kinds
    TEXT = 0  # visible text
    OPEN = 1  # opens formatting; ``close`` is the markup that ends it at a cut
    CLOSE = 2  # closes the innermost open formatting with the same tag
    PREFIX = 3  # markup that belongs to what follows it (a line's "> " or "# ")


class Atom(NamedTuple):
    """One piece of rendered text as the splitter sees it: markup that opens or closes
    formatting, a line prefix, or one unit of text (a character, a whole escape such as
    ``&lt;`` or ``\\*``, a mention), so that a split never falls inside one."""

    raw: str  # as it appears in the rendered text
    char: str = ""  # the text it shows ("" for markup)
    tag: str = ""  # markup: "b", "i", "s", "code", "pre" (a code block), "a", "quote", "h" ... ("" for text)
    mark: Mark = Mark.TEXT
    close: str = ""  # for an opener: the markup that closes it


_CHAR_ATOMS: dict[str, Atom] = {}  # one atom per distinct character: far fewer objects
_NO_ESCAPES: Mapping[str, Atom] = {}


def text_atoms(text: str, escapes: Mapping[str, Atom] = _NO_ESCAPES) -> list[Atom]:
    """One atom per character of ``text``: its escape's atom where ``escapes`` has one (``&``
    -> ``Atom("&amp;", "&")``), else the character as it is."""
    cache = _CHAR_ATOMS
    try:
        if not escapes:
            return [cache[char] for char in text]
        return [escapes.get(char) or cache[char] for char in text]
    except KeyError:
        if len(cache) > 65536:
            cache.clear()
        for char in text:
            cache.setdefault(char, Atom(char, char))
        return text_atoms(text, escapes)


def wrap(inner: list[Atom], opener: str, closer: str, tag: str) -> list[Atom]:
    """``inner`` between the markup that opens formatting ``tag`` and the markup that closes it."""
    return [Atom(opener, "", tag, Mark.OPEN, closer), *inner, Atom(closer, "", tag, Mark.CLOSE)]


_NEWLINE = Atom("\n", "\n")


def quote_lines(inner: list[Atom], prefix: Atom) -> list[Atom]:
    """``prefix`` (a quote's "> ") before every line of ``inner``, except the lines of its code
    blocks (a quote marker inside a code block would be code) and the blank line around one
    (it ends the quote)."""
    def is_fence(at: int) -> bool:  # a code block opens at inner[at]
        return at < len(inner) and inner[at].mark is Mark.OPEN and inner[at].tag == "pre"

    out = [] if is_fence(0) else [prefix]
    in_code = False
    for index, atom in enumerate(inner):
        out.append(atom)
        if atom.tag == "pre" and atom.mark in (Mark.OPEN, Mark.CLOSE):
            in_code = atom.mark is Mark.OPEN
        elif atom == _NEWLINE and not in_code and not is_fence(index + 1):
            blank = index + 1 < len(inner) and inner[index + 1] == _NEWLINE
            if blank and (is_fence(index + 2) or index and inner[index - 1].tag == "pre"
                          and inner[index - 1].mark is Mark.CLOSE):
                continue  # the blank line around a code block: no prefix
            out.append(prefix)
    return out


_QUOTE = Atom("> ", "", "quote", Mark.PREFIX)


class Dialect(ABC):
    """A platform's atoms. Every method returns atoms whose ``raw`` joined is text in the
    dialect, ready to send; a platform subclasses it and writes the abstract methods.

    ``inner`` arguments are atoms the walker has already rendered; ``code`` arguments are
    raw and escaped by the dialect. ``link_markup`` says whether formatting may appear
    inside a link's text (else the walker gives the link plain, escaped text).
    ``block_openers`` are the characters that open a block when a line starts with them
    (Discord's ``#``, ``>``, ``-``, ``+``): a chunk cut from the middle of a line that starts
    with one gets it escaped (``text``), as the walker escapes a line's start.

    The defaults are those most platforms share: the rule ``HR``, links that may hold
    formatting, no block openers, no text taken as written without ``text``, "• item" /
    "3. item" markers, headings as bold lines, quotes as ``> `` lines (code blocks left
    alone) and tables as a code block of their lines.
    """

    name: str
    hr = HR  # a horizontal rule's line
    link_markup = True
    block_openers = ""

    @abstractmethod
    def text(self, text: str) -> list[Atom]:
        """Plain text, escaped so that it shows as it is: one atom per unit."""

    def verbatim(self, text: str) -> bool:
        """Whether ``text`` (plain text) is written as it is, nothing escaped or changed: a
        quick look, False when unsure. A line it is true for is sent without atoms (most
        short answers)."""
        return False

    @abstractmethod
    def bold(self, inner: list[Atom]) -> list[Atom]: ...

    @abstractmethod
    def italic(self, inner: list[Atom]) -> list[Atom]: ...

    @abstractmethod
    def strike(self, inner: list[Atom]) -> list[Atom]: ...

    @abstractmethod
    def code(self, code: str) -> list[Atom]:
        """Inline code from raw text."""

    @abstractmethod
    def code_block(self, code: str, language: str) -> list[Atom]:
        """A code block from raw text (tagged ``pre``); ``language`` is "" or a word like ``python``."""

    @abstractmethod
    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        """A link; ``url`` passed the allow-list."""

    def quote(self, inner: list[Atom]) -> list[Atom]:
        """A block quote around rendered blocks (quotes inside quotes are flattened)."""
        return quote_lines(inner, _QUOTE)

    def heading(self, inner: list[Atom], level: int) -> list[Atom]:
        return self.bold(inner)

    def item(self, number: int | None) -> str:
        """A list item's marker: a bullet (``number`` None) or a number, with its space."""
        return "• " if number is None else f"{number}. "

    def table(self, lines: list[str]) -> list[Atom]:
        """A table laid out as aligned monospace ``lines`` (raw text, not escaped)."""
        return self.code_block("\n".join(lines), "")


class PlainDialect(Dialect):
    """Readable text without markup: code blocks as their lines, tables aligned, links
    followed by their address, quotes behind "│ ". Every atom is text."""

    name = "plain"
    link_markup = False

    def text(self, text: str) -> list[Atom]:
        return text_atoms(text)

    def verbatim(self, text: str) -> bool:
        return True

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return inner

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return inner

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return inner

    def code(self, code: str) -> list[Atom]:
        return text_atoms(code)

    def code_block(self, code: str, language: str) -> list[Atom]:
        return text_atoms(code)

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        shown = "".join(atom.char for atom in inner)
        return text_atoms(url) if shown in (url, url.removeprefix("mailto:")) else [*inner, *text_atoms(f" ({url})")]

    def quote(self, inner: list[Atom]) -> list[Atom]:
        def bar(at: int) -> list[Atom]:  # before the line starting at inner[at]: "│ ", or "│" when it is empty
            return text_atoms("│ " if at < len(inner) and inner[at] != _NEWLINE else "│")

        out = bar(0)
        for index, atom in enumerate(inner):
            out.append(atom)
            if atom == _NEWLINE:
                out.extend(bar(index + 1))
        return out


PLAIN = PlainDialect()
