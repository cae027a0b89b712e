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
narrow column: ``LIMITS`` also cuts after 17 lines.
"""

from __future__ import annotations

import re

from bot.channels import Atom, DialectBase, Limits, Measure, Role, text_atoms

__all__ = ["DISCORD", "DiscordDialect", "LIMITS"]

LIMITS = Limits(chunk=2000, measure=Measure.CHARS, max_lines=17)

ZWSP = "\u200b"
_URL = re.compile(r"https?://[^\s<>*~`|\\\[\]]+")
_SPECIAL = re.compile(r"[\\*_~`|\[\]]|(?:^|(?<=\n))[ \t]*[#>+-]")
_PINGS = re.compile(r"@(everyone|here)")
_FENCE = re.compile(r"```([\w+#.-]*)\n")
_LINK_END = re.compile(r"\]\(<([^<>\s]*)>\)")
_HEADING = re.compile(r"#{1,3} ")
_TEXT = re.compile(r"[^\\`h\[\]*_~\n]+")
_TOGGLES = {"**": "b", "_": "i", "~~": "s"}


def _escape(text: str) -> str:
    return _SPECIAL.sub(_backslash, text)


def _backslash(match: re.Match[str]) -> str:
    found = match.group(0)  # a Markdown character, or one that would open a line's block
    return found[:-1] + "\\" + found[-1]


def _code(code: str) -> str:
    """Code as Discord shows it: raw, with no two backticks in a row (no fence can end it)."""
    while "``" in code:
        code = code.replace("``", f"`{ZWSP}`")
    return code


def _url(url: str) -> str:
    return url.replace("<", "%3C").replace(">", "%3E").replace(" ", "%20")


class DiscordDialect(DialectBase):
    name = "discord"
    block_openers = "#>+-"

    def text(self, text: str) -> str:
        text = _PINGS.sub(f"@{ZWSP}\\1", text)
        out: list[str] = []
        at = 0
        for match in _URL.finditer(text):  # a URL stays as it is, or Discord would not link it
            out.append(_escape(text[at:match.start()]))
            out.append(match.group(0))
            at = match.end()
        out.append(_escape(text[at:]))
        return "".join(out)

    def code_text(self, code: str) -> str:
        return _code(code)

    def bold(self, inner: str) -> str:
        return f"**{inner}**"

    def italic(self, inner: str) -> str:
        return f"_{inner}_"

    def strike(self, inner: str) -> str:
        return f"~~{inner}~~"

    def code(self, code: str) -> str:
        code = self.code_text(code)
        return f"`{code}`" if "`" not in code else f"`` {code} ``"

    def code_block(self, code: str, language: str) -> str:
        return f"```{language}\n{self.code_text(code)}\n```"

    def link(self, inner: str, url: str) -> str:
        return f"[{inner}](<{_url(url)}>)"

    def heading(self, inner: str, level: int) -> str:
        return f"{'#' * level} {inner}" if level <= 3 else f"**{inner}**"

    def tokens(self, rendered: str) -> list[Atom]:
        return _Reader(rendered).atoms


class _Reader:
    """Discord Markdown as written by ``DiscordDialect``, read back as atoms."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: list[Atom] = []
        self.open: list[int] = []  # indices in atoms of open formatting, innermost last
        self.read()

    def tags(self) -> list[str]:
        return [self.atoms[index].tag for index in self.open]

    def push(self, raw: str, tag: str, close: str) -> None:
        self.open.append(len(self.atoms))
        self.atoms.append(Atom(raw, "", tag, Role.OPEN, close))

    def pop(self, raw: str, tag: str) -> None:
        tags = self.tags()
        if tag in tags:
            del self.open[len(tags) - 1 - tags[::-1].index(tag):]
        self.atoms.append(Atom(raw, "", tag, Role.CLOSE))

    def read(self) -> None:
        text, atoms, at, end = self.text, self.atoms, 0, len(self.text)
        while at < end:
            if at == 0 or text[at - 1] == "\n" or (atoms and atoms[-1].role is Role.PREFIX):
                if text.startswith("> ", at):
                    atoms.append(Atom("> ", "", "quote", Role.PREFIX))
                    at += 2
                    continue
                if (heading := _HEADING.match(text, at)) is not None:
                    atoms.append(Atom(heading.group(0), "", "h", Role.PREFIX))
                    at = heading.end()
                    continue
                if (fence := _FENCE.match(text, at)) is not None:
                    at = self.code(fence.group(0), "pre", "\n```", fence.end())
                    continue
            char = text[at]
            if char == "\\" and at + 1 < end:
                atoms.append(Atom(text[at:at + 2], text[at + 1]))
                at += 2
            elif char == "`":
                opener = "`` " if text.startswith("`` ", at) else "`"
                at = self.code(opener, "code", " ``" if opener == "`` " else "`", at + len(opener))
            elif char == "h" and (url := _URL.match(text, at)) is not None:
                atoms.extend(text_atoms(url.group(0)))
                at = url.end()
            elif char == "[":
                self.push("[", "a", "")
                at += 1
            elif char == "]" and "a" in self.tags() and (link := _LINK_END.match(text, at)) is not None:
                index = self.open[len(self.tags()) - 1 - self.tags()[::-1].index("a")]
                atoms[index] = atoms[index]._replace(close=link.group(0))
                self.pop(link.group(0), "a")
                at = link.end()
            elif (marker := text[at:at + 2] if text.startswith(("**", "~~"), at) else char) in _TOGGLES:
                tag = _TOGGLES[marker]
                if tag in self.tags():
                    self.pop(marker, tag)
                else:
                    self.push(marker, tag, marker)
                at += len(marker)
            else:  # text up to the next character that may start markup
                run = _TEXT.match(text, at + 1) if char != "\n" else None
                stop = run.end() if run is not None else at + 1
                atoms.extend(text_atoms(text[at:stop]))
                at = stop

    def code(self, opener: str, tag: str, closer: str, at: int) -> int:
        """Read a code span or block from ``at``; the index after its closer."""
        self.push(opener, tag, closer)
        stop = self.text.find(closer, at)
        if tag == "pre":  # a fence closes on a line of its own
            while stop >= 0 and not (stop + len(closer) == len(self.text) or self.text[stop + len(closer)] == "\n"):
                stop = self.text.find(closer, stop + 1)
        if stop < 0:  # not closed (a hand-written text): the rest is code
            stop = len(self.text)
        self.atoms.extend(text_atoms(self.text[at:stop]))
        if stop < len(self.text):
            self.pop(closer, tag)
        return stop + len(closer)


DISCORD = DiscordDialect()
