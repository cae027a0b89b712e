"""Rendered text read back as atoms: test-only code.

The pipeline never reads its own output (the walker emits atoms, ``render_atoms``); tests
that hold a rendered chunk, a send or a hand-written message, and check that a split
never fell inside a tag, an entity, an escape or a fence, read it back here, with the
readers each dialect once had for its own text.

- ``atoms(rendered, dialect)``: the atoms of rendered text
- ``plain(rendered, dialect)``: the text a reader sees
- ``measure(rendered, dialect, shape)``: its length as the platform counts it
"""

from __future__ import annotations

import html
import re

from adapters.discord.dialect import DISCORD
from adapters.slack.dialect import SLACK
from adapters.telegram.dialect import TELEGRAM, html_to_text
from adapters.whatsapp.dialect import WHATSAPP
from bot.channels import Atom, Dialect, MessageShape, Mark, text_atoms
from bot.outbound.split import measure as measure_atoms

Z = "\u200b"

# --- Telegram HTML ------------------------------------------------------------------------

_PIECES = re.compile(r"<[^>]*>|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);|[^<&]+|[<&]")
_TAG_NAME = re.compile(r"</?\s*([a-zA-Z][a-zA-Z0-9-]*)")


def telegram_atoms(rendered: str) -> list[Atom]:
    """Telegram HTML (any tags, any entities) read back as atoms."""
    atoms: list[Atom] = []
    for match in _PIECES.finditer(rendered):
        piece = match.group(0)
        if piece.startswith("<") and piece.endswith(">") and len(piece) > 2:
            name = _TAG_NAME.match(piece)
            if name is not None:
                tag = name.group(1).lower()
                if piece.startswith("</"):
                    atoms.append(Atom(piece, "", tag, Mark.CLOSE))
                else:
                    atoms.append(Atom(piece, "", tag, Mark.OPEN, f"</{tag}>"))
                continue
        if piece.startswith("&") and len(piece) > 1:
            char = html.unescape(piece)
            if len(char) == 1:  # else not an entity Telegram knows: leave it as text
                atoms.append(Atom(piece, char))
                continue
        atoms.extend(text_atoms(piece))
    return atoms


# --- Discord Markdown ---------------------------------------------------------------------

_D_URL = re.compile(r"https?://[^\s<>*~`|\\\[\]]+")
_D_FENCE = re.compile(r"```([\w+#.-]*)\n")
_D_LINK_END = re.compile(r"\]\(<([^<>\s]*)>\)")
_D_HEADING = re.compile(r"#{1,3} ")
_D_TEXT = re.compile(r"[^\\`h\[\]*_~\n]+")
_D_TOGGLES = {"**": "b", "_": "i", "~~": "s"}


class _DiscordReader:
    """Discord Markdown as ``DiscordDialect`` writes it, read back as atoms."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: list[Atom] = []
        self.open: list[int] = []  # indices in atoms of open formatting, innermost last
        self.read()

    def tags(self) -> list[str]:
        return [self.atoms[index].tag for index in self.open]

    def push(self, raw: str, tag: str, close: str) -> None:
        self.open.append(len(self.atoms))
        self.atoms.append(Atom(raw, "", tag, Mark.OPEN, close))

    def pop(self, raw: str, tag: str) -> None:
        tags = self.tags()
        if tag in tags:
            del self.open[len(tags) - 1 - tags[::-1].index(tag):]
        self.atoms.append(Atom(raw, "", tag, Mark.CLOSE))

    def read(self) -> None:
        text, atoms, at, end = self.text, self.atoms, 0, len(self.text)
        while at < end:
            if at == 0 or text[at - 1] == "\n" or (atoms and atoms[-1].mark is Mark.PREFIX):
                if text.startswith("> ", at):
                    atoms.append(Atom("> ", "", "quote", Mark.PREFIX))
                    at += 2
                    continue
                if (heading := _D_HEADING.match(text, at)) is not None:
                    atoms.append(Atom(heading.group(0), "", "h", Mark.PREFIX))
                    at = heading.end()
                    continue
                if (fence := _D_FENCE.match(text, at)) is not None:
                    at = self.code(fence.group(0), "pre", "\n```", fence.end())
                    continue
            char = text[at]
            if char == "\\" and at + 1 < end:
                atoms.append(Atom(text[at:at + 2], text[at + 1]))
                at += 2
            elif char == "`":
                opener = "`` " if text.startswith("`` ", at) else "`"
                at = self.code(opener, "code", " ``" if opener == "`` " else "`", at + len(opener))
            elif char == "h" and (url := _D_URL.match(text, at)) is not None:
                atoms.extend(text_atoms(url.group(0)))
                at = url.end()
            elif char == "[":
                self.push("[", "a", "")
                at += 1
            elif char == "]" and "a" in self.tags() and (link := _D_LINK_END.match(text, at)) is not None:
                index = self.open[len(self.tags()) - 1 - self.tags()[::-1].index("a")]
                atoms[index] = atoms[index]._replace(close=link.group(0))
                self.pop(link.group(0), "a")
                at = link.end()
            elif (marker := text[at:at + 2] if text.startswith(("**", "~~"), at) else char) in _D_TOGGLES:
                tag = _D_TOGGLES[marker]
                if tag in self.tags():
                    self.pop(marker, tag)
                else:
                    self.push(marker, tag, marker)
                at += len(marker)
            else:  # text up to the next character that may start markup
                run = _D_TEXT.match(text, at + 1) if char != "\n" else None
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


# --- Slack mrkdwn -------------------------------------------------------------------------

_S_MENTION = re.compile(r"<[@#][UWCG][A-Z0-9]+(?:\|[^<>|\n]*)?>")
_S_ENTITY = re.compile(r"&(?:amp|lt|gt);")
_S_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">"}
_S_MARKERS = {"*": "b", "_": "i", "~": "s"}
_S_TEXT = re.compile("[^&\u200b*_~`<>\n]+")
_S_LINK = re.compile(r"<([^<>|\s]+)\|")


class _SlackReader:
    """Slack mrkdwn as ``SlackDialect`` writes it, read back as atoms."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: list[Atom] = []
        self.open: list[str] = []  # tags of open formatting, innermost last
        self.read()

    def push(self, raw: str, tag: str, close: str) -> None:
        self.open.append(tag)
        self.atoms.append(Atom(raw, "", tag, Mark.OPEN, close))

    def pop(self, raw: str, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]
        self.atoms.append(Atom(raw, "", tag, Mark.CLOSE))

    def read(self) -> None:
        text, atoms, at, end = self.text, self.atoms, 0, len(self.text)
        while at < end:
            if (at == 0 or text[at - 1] == "\n") and "a" not in self.open:
                if text.startswith("> ", at):
                    atoms.append(Atom("> ", "", "quote", Mark.PREFIX))
                    at += 2
                    continue
                if text.startswith("```\n", at):
                    at = self.code("```\n", "pre", "\n```", at + 4)
                    continue
            char = text[at]
            if char == "&" and (entity := _S_ENTITY.match(text, at)) is not None:
                atoms.append(Atom(entity.group(0), _S_ENTITIES[entity.group(0)]))
                at = entity.end()
            elif char == Z and at + 1 < end and text[at + 1] in _S_MARKERS:
                self.push(text[at:at + 2], _S_MARKERS[text[at + 1]], text[at + 1] + Z)
                at += 2
            elif char in _S_MARKERS and text.startswith(Z, at + 1) and _S_MARKERS[char] in self.open:
                self.pop(char + Z, _S_MARKERS[char])
                at += 2
            elif char == "`":
                at = self.code("`", "code", "`", at + 1)
            elif char == "<" and (mention := _S_MENTION.match(text, at)) is not None:
                atoms.append(Atom(mention.group(0), mention.group(0)))
                at = mention.end()
            elif char == "<" and (link := _S_LINK.match(text, at)) is not None:
                self.push(link.group(0), "a", ">")
                at = link.end()
            elif char == ">" and "a" in self.open:
                self.pop(">", "a")
                at += 1
            else:  # text up to the next character that may start markup
                run = _S_TEXT.match(text, at + 1) if char != "\n" else None
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
        for entity_or_char in re.finditer(r"&(?:amp|lt|gt);|[\s\S]", self.text[at:stop]):
            piece = entity_or_char.group(0)
            self.atoms.append(Atom(piece, _S_ENTITIES[piece]) if len(piece) > 1 else text_atoms(piece)[0])
        if stop < len(self.text):
            self.pop(closer, tag)
        return stop + len(closer)


# --- WhatsApp -----------------------------------------------------------------------------

_W_MARKERS = {"*": "b", "_": "i", "~": "s", "`": "code"}


def _w_edge(char: str) -> bool:
    return not char.isalnum()


class _WhatsAppReader:
    """WhatsApp markup as ``WhatsAppDialect`` writes it, read back as atoms: a marker counts
    where WhatsApp takes one (opening after an edge before a non-space, closing after a
    non-space before an edge, an edge being anything but a letter or a digit: the dialect's
    zero-width space too), else it is text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: list[Atom] = []
        self.open: list[str] = []
        self.read()

    def read(self) -> None:
        text, atoms, at, end = self.text, self.atoms, 0, len(self.text)
        while at < end:
            if at == 0 or text[at - 1] == "\n":
                if text.startswith(Z + ">", at):
                    atoms.append(Atom(Z + ">", ">"))
                    at += 2
                    continue
                if text.startswith("> ", at):
                    atoms.append(Atom("> ", "", "quote", Mark.PREFIX))
                    at += 2
                    continue
                if text.startswith("```\n", at):
                    stop = text.find("\n```", at + 4)
                    stop = end if stop < 0 else stop
                    atoms.append(Atom("```\n", "", "pre", Mark.OPEN, "\n```"))
                    atoms.extend(text_atoms(text[at + 4:stop]))
                    if stop < end:
                        atoms.append(Atom("\n```", "", "pre", Mark.CLOSE))
                    at = stop + 4
                    continue
            char = text[at]
            zopen = char == Z and at + 1 < end and text[at + 1] in _W_MARKERS
            marker = text[at + 1] if zopen else char
            if marker in _W_MARKERS:
                start = at + 1 if zopen else at  # the marker's own index
                before = text[start - 1] if start else ""
                after = text[start + 1] if start + 1 < end else ""
                tag = _W_MARKERS[marker]
                raw_open = text[at:start + 1]
                if tag in self.open and before and not before.isspace() and _w_edge(after) and not zopen:
                    closer = marker + Z if after == Z else marker
                    del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]
                    atoms.append(Atom(closer, "", tag, Mark.CLOSE))
                    at = start + len(closer)
                    continue
                if tag not in self.open and _w_edge(before) and after and not after.isspace():
                    closer = marker + Z if zopen else marker
                    if tag == "code":
                        stop = text.find(closer, start + 1)
                        if stop > start + 1:
                            atoms.append(Atom(raw_open, "", tag, Mark.OPEN, closer))
                            atoms.extend(text_atoms(text[start + 1:stop]))
                            atoms.append(Atom(closer, "", tag, Mark.CLOSE))
                            at = stop + len(closer)
                            continue
                    else:
                        self.open.append(tag)
                        atoms.append(Atom(raw_open, "", tag, Mark.OPEN, closer))
                        at = start + 1
                        continue
            atoms.extend(text_atoms(char))
            at += 1


# --- every dialect ------------------------------------------------------------------------

def atoms(rendered: str, dialect: Dialect) -> list[Atom]:
    """``rendered`` (text in ``dialect``) read back as atoms."""
    if dialect.name == TELEGRAM.name:
        return telegram_atoms(rendered)
    if dialect.name == DISCORD.name:
        return _DiscordReader(rendered).atoms
    if dialect.name == SLACK.name:
        return _SlackReader(rendered).atoms
    if dialect.name == WHATSAPP.name:
        return _WhatsAppReader(rendered).atoms
    return text_atoms(rendered)  # the terminal's plain text: every character is text


def plain(rendered: str, dialect: Dialect) -> str:
    """A rendered chunk as the plain text a reader would see."""
    if dialect.name == TELEGRAM.name:
        return html_to_text(rendered)
    return "".join(atom.char for atom in atoms(rendered, dialect))


def measure(rendered: str, dialect: Dialect, shape: MessageShape) -> int:
    """A rendered message's length as the platform counts it."""
    return measure_atoms(atoms(rendered, dialect), shape)
