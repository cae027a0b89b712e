"""Discord's dialect: Discord renders Markdown itself, so this writes Markdown it reads.

Pure: no SDK. Bold ``**x**``, italic ``_x_``, strike ``~~x~~``, inline code, fenced code
with its language, masked links ``[text](<url>)`` (the angle brackets keep Discord from
embedding a preview), quotes as ``> `` lines, headings ``#``/``##``/``###`` (deeper ones as
bold lines), lists as "• item" lines and tables as aligned code blocks. Every Markdown
character of text is escaped with a backslash (Discord drops the backslash of any
punctuation), as is a ``#``, ``>``, ``-`` or ``+`` that would open a line's block, except
inside bare URLs, which Discord must still recognise. Italics use ``_``, which Discord
does not apply inside a word ("un_believ_able" stays as it is); bold works anywhere.
``@everyone`` and ``@here`` get a zero-width space after the ``@``, a second line of
defence behind the channel's allowed mentions.

A message is at most 2,000 characters as sent, and long messages read badly in Discord's
narrow column: ``SHAPE`` also cuts after 17 lines.
"""

from __future__ import annotations

import re

from bot.channels import Atom, Dialect, Mark, Measure, MessageShape, text_atoms, wrap

__all__ = ["DISCORD", "DiscordDialect", "SHAPE"]

SHAPE = MessageShape(chunk=2000, measure=Measure.CHARS, max_lines=17)

ZWSP = "\u200b"
_URL = re.compile(r"https?://[^\s<>*~`|\\\[\]]+")
_SPECIAL = re.compile(r"[\\*_~`|\[\]]|(?:^|(?<=\n))[ \t]*[#>+-]")
_PINGS = re.compile(r"@(everyone|here)")
_HEADINGS = {level: Atom("#" * level + " ", "", "h", Mark.PREFIX) for level in (1, 2, 3)}


def _escaped(text: str) -> list[Atom]:
    """Text with a backslash before each Markdown character, and before a character that
    would open a block at a line's start (after its indentation)."""
    atoms: list[Atom] = []
    at = 0
    for match in _SPECIAL.finditer(text):
        found = match.group(0)
        atoms.extend(text_atoms(text[at:match.end() - 1]))
        atoms.append(Atom("\\" + found[-1], found[-1]))
        at = match.end()
    atoms.extend(text_atoms(text[at:]))
    return atoms


def _code(code: str) -> str:
    """Code as Discord shows it: raw, with no two backticks in a row (no fence can end it)."""
    while "``" in code:
        code = code.replace("``", f"`{ZWSP}`")
    return code


def _url(url: str) -> str:
    return url.replace("<", "%3C").replace(">", "%3E").replace(" ", "%20")


class DiscordDialect(Dialect):
    name = "discord"
    block_openers = "#>+-"

    def text(self, text: str) -> list[Atom]:
        text = _PINGS.sub(f"@{ZWSP}\\1", text)
        atoms: list[Atom] = []
        at = 0
        for match in _URL.finditer(text):  # a URL stays as it is, or Discord would not link it
            atoms.extend(_escaped(text[at:match.start()]))
            atoms.extend(text_atoms(match.group(0)))
            at = match.end()
        atoms.extend(_escaped(text[at:]))
        return atoms

    def verbatim(self, text: str) -> bool:
        return "@" not in text and _SPECIAL.search(text) is None

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "**", "**", "b")

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "_", "_", "i")

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "~~", "~~", "s")

    def code(self, code: str) -> list[Atom]:
        code = _code(code)
        if "`" in code:
            return wrap(text_atoms(code), "`` ", " ``", "code")
        return wrap(text_atoms(code), "`", "`", "code")

    def code_block(self, code: str, language: str) -> list[Atom]:
        return wrap(text_atoms(_code(code)), f"```{language}\n", "\n```", "pre")

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        return wrap(inner, "[", f"](<{_url(url)}>)", "a")

    def heading(self, inner: list[Atom], level: int) -> list[Atom]:
        return [_HEADINGS[level], *inner] if level <= 3 else self.bold(inner)


DISCORD = DiscordDialect()
