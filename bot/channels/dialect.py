"""A platform's message format, as the core's one Markdown walker needs it (STYLE habit 17).

The walker (``bot.outbound.markdown``) decides structure once for every platform; a
``Dialect`` supplies the atoms: how bold, a link, a code block, a quote ... are written and
how text is escaped. It also reads its own output back as ``Atom``s (``tokens``) for the
splitter (``bot.outbound.split``), and turns a rendered chunk back into plain text
(``plain``) for a fallback when a platform refuses the markup.

This is the port's side of the format, so that a platform package, which imports only the
port, can write its dialect: the interface, ``DialectBase`` with the defaults most
dialects share, the atoms they read back, and ``PLAIN`` (the terminal's, and the fakes').
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import IntEnum
from typing import NamedTuple, Protocol

__all__ = ["HR", "PLAIN", "Atom", "Dialect", "DialectBase", "PlainDialect", "Role", "quote_lines", "text_atoms"]

HR = "———"  # a horizontal rule's line, where a dialect has no rule of its own


class Role(IntEnum):
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
    tag: str = ""  # markup: "b", "i", "s", "code", "pre", "a", "quote", "h" ... ("" for text)
    role: Role = Role.TEXT
    close: str = ""  # for an opener: the markup that closes it


_CHAR_ATOMS: dict[str, Atom] = {}  # one atom per distinct character: far fewer objects


def text_atoms(text: str) -> list[Atom]:
    """One text atom per character of ``text`` (which needs no escaping)."""
    cache = _CHAR_ATOMS
    try:
        return [cache[char] for char in text]
    except KeyError:
        if len(cache) > 65536:
            cache.clear()
        for char in text:
            cache.setdefault(char, Atom(char, char))
        return [cache[char] for char in text]


class Dialect(Protocol):
    """A platform's atoms. Every method returns text in the dialect, ready to send.

    ``inner`` arguments are already rendered (escaped) by the walker; ``code`` arguments are
    raw and escaped by the dialect (``code_text``). ``link_markup`` says whether formatting
    may appear inside a link's text (else the walker gives the link plain, escaped text).
    ``block_openers`` are the characters that open a block when a line starts with them
    (Discord's ``#``, ``>``, ``-``, ``+``): a chunk cut from the middle of a line that starts
    with one gets it escaped (``text``), as the walker escapes a line's start.
    """

    name: str
    hr: str  # a horizontal rule's line
    link_markup: bool
    block_openers: str

    def text(self, text: str) -> str:
        """Escape plain text so that it shows as it is."""
        ...

    def code_text(self, code: str) -> str:
        """Escape text inside code (inline or block)."""
        ...

    def bold(self, inner: str) -> str: ...

    def italic(self, inner: str) -> str: ...

    def strike(self, inner: str) -> str: ...

    def code(self, code: str) -> str:
        """Inline code from raw text."""
        ...

    def code_block(self, code: str, language: str) -> str:
        """A code block from raw text; ``language`` is "" or a word like ``python``."""
        ...

    def link(self, inner: str, url: str) -> str:
        """A link; ``url`` passed the allow-list."""
        ...

    def quote(self, inner: str) -> str:
        """A block quote around rendered blocks (quotes inside quotes are flattened)."""
        ...

    def heading(self, inner: str, level: int) -> str: ...

    def item(self, number: int | None) -> str:
        """A list item's marker: a bullet (``number`` None) or a number, with its space."""
        ...

    def table(self, lines: list[str]) -> str:
        """A table laid out as aligned monospace ``lines`` (raw text, not escaped)."""
        ...

    def tokens(self, rendered: str) -> list[Atom]:
        """Read rendered text back as atoms for the splitter."""
        ...

    def plain(self, rendered: str) -> str:
        """A rendered chunk as the plain text a reader would see."""
        ...


def quote_lines(inner: str, prefix: str = "> ", fence: str = "```") -> str:
    """Prefix every line of ``inner`` with ``prefix``, except the lines of its code blocks
    (from a line that starts with ``fence`` to the next): a quote marker inside a code block
    would be code."""
    lines = inner.split("\n")
    out: list[str] = []
    in_code = False
    for index, line in enumerate(lines):
        if line.startswith(fence):
            in_code = not in_code  # code never holds a fence: dialects break it up
            out.append(line)
        elif in_code:
            out.append(line)
        elif not line and (index + 1 < len(lines) and lines[index + 1].startswith(fence)
                           or index and lines[index - 1].startswith(fence)):
            out.append(line)  # the blank line around a code block ends the quote
        else:
            out.append(prefix + line)
    return "\n".join(out)


class DialectBase(ABC):
    """A ``Dialect`` with the defaults most platforms share: the rule ``HR``, links that may
    hold formatting, no block openers, "• item" / "3. item" markers, headings as bold lines,
    quotes as ``> `` lines (code blocks left alone), tables as a code block of their lines,
    and the plain text of a chunk as the text of its atoms. A platform writes the rest."""

    name: str
    hr = HR
    link_markup = True
    block_openers = ""

    @abstractmethod
    def text(self, text: str) -> str: ...

    @abstractmethod
    def code_text(self, code: str) -> str: ...

    @abstractmethod
    def bold(self, inner: str) -> str: ...

    @abstractmethod
    def italic(self, inner: str) -> str: ...

    @abstractmethod
    def strike(self, inner: str) -> str: ...

    @abstractmethod
    def code(self, code: str) -> str: ...

    @abstractmethod
    def code_block(self, code: str, language: str) -> str: ...

    @abstractmethod
    def link(self, inner: str, url: str) -> str: ...

    @abstractmethod
    def tokens(self, rendered: str) -> list[Atom]: ...

    def quote(self, inner: str) -> str:
        return quote_lines(inner, "> ")

    def heading(self, inner: str, level: int) -> str:
        return self.bold(inner)

    def item(self, number: int | None) -> str:
        return "• " if number is None else f"{number}. "

    def table(self, lines: list[str]) -> str:
        return self.code_block("\n".join(lines), "")

    def plain(self, rendered: str) -> str:
        return "".join(atom.char for atom in self.tokens(rendered))


class PlainDialect(DialectBase):
    """Readable text without markup: code blocks as their lines, tables aligned, links
    followed by their address, quotes behind "│ "."""

    name = "plain"
    link_markup = False

    def text(self, text: str) -> str:
        return text

    def code_text(self, code: str) -> str:
        return code

    def bold(self, inner: str) -> str:
        return inner

    def italic(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def code(self, code: str) -> str:
        return code

    def code_block(self, code: str, language: str) -> str:
        return code

    def link(self, inner: str, url: str) -> str:
        return url if inner in (url, url.removeprefix("mailto:")) else f"{inner} ({url})"

    def quote(self, inner: str) -> str:
        return "\n".join("│ " + line if line else "│" for line in inner.split("\n"))

    def tokens(self, rendered: str) -> list[Atom]:
        return text_atoms(rendered)

    def plain(self, rendered: str) -> str:
        return rendered


PLAIN = PlainDialect()
