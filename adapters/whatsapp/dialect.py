"""WhatsApp's dialect: the markup WhatsApp shows in a text message.

Pure: no SDK. Bold ``*x*``, italic ``_x_``, strike ``~x~``, inline code `` `x` ``, code
blocks as ```` ``` ```` monospace on lines of their own, quotes as ``> `` lines, lists as
"• item" / "3. item" lines, headings as bold lines and tables as monospace blocks. Links are
text: their words, then the address in brackets (WhatsApp links a bare address by itself).

Our markers are written with a zero-width space on their outer side (``\u200b*bold*\u200b``):
WhatsApp takes a marker only where no letter or digit touches its outer side, so a word
bold in its middle (``un**believ**able``) is bold there too.

WhatsApp has no escape character. It takes ``*``, ``_``, ``~`` and a backtick as markup
only where one can open (at the start, or after a space or punctuation, before a non-space)
or close (after a non-space, before the end, a space or punctuation). Such a character
in the model's own text, where it could open or close, is written as the character that
looks like it (``∗ ˍ ∼ ˋ``); between two letters or digits (``snake_case``, ``2*3``) it stays. A ``>``
that may start a line (at the start of a piece of text, or after a line break in it) gets a
zero-width space before it, so that it is not a quote. So no text ever pairs with another
text or with our markers.

A message is at most 4,096 characters as sent (``SHAPE``).
"""

from __future__ import annotations

from bot.channels import Atom, Dialect, Measure, MessageShape, text_atoms, wrap

__all__ = ["SHAPE", "WHATSAPP", "WHATSAPP_LIMIT", "WhatsAppDialect", "lookalike"]

WHATSAPP_LIMIT = 4096
SHAPE = MessageShape(chunk=WHATSAPP_LIMIT, measure=Measure.CHARS)

ZWSP = "\u200b"
LOOKALIKES = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}  # ∗ ˍ ∼ ˋ
_MARKERS = frozenset(LOOKALIKES)
_QUOTE_START = Atom(ZWSP + ">", ">")


def _edge(char: str) -> bool:
    """Where a marker may open after or close before: a text's edge, a space, punctuation
    (another marker too, which may become a lookalike itself)."""
    return not char.isalnum()


def lookalike(text: str) -> str:
    """``text`` with every marker character that WhatsApp could take as markup replaced by its
    lookalike; one between two letters or digits (``snake_case``, ``2*3``) is left alone."""
    if not any(c in _MARKERS for c in text):
        return text
    out = []
    for at, char in enumerate(text):
        if char in _MARKERS:
            before = text[at - 1] if at else ""
            after = text[at + 1] if at + 1 < len(text) else ""
            if _edge(before) or _edge(after) or char == "`":
                char = LOOKALIKES[char]
        out.append(char)
    return "".join(out)


class WhatsAppDialect(Dialect):
    name = "whatsapp"
    link_markup = False  # a link is its words and its address, as text
    block_openers = ">"

    def text(self, text: str) -> list[Atom]:
        text = lookalike(text.replace(ZWSP, ""))
        if ">" not in text:
            return text_atoms(text)
        atoms: list[Atom] = []
        for index, line in enumerate(text.split("\n")):  # a ">" that may start a line is not a quote
            if index:
                atoms.extend(text_atoms("\n"))
            atoms.extend([_QUOTE_START, *text_atoms(line[1:])] if line.startswith(">") else text_atoms(line))
        return atoms

    def verbatim(self, text: str) -> bool:
        return not any(c in _MARKERS or c == ">" or c == ZWSP for c in text)

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, ZWSP + "*", "*" + ZWSP, "b")

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, ZWSP + "_", "_" + ZWSP, "i")

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, ZWSP + "~", "~" + ZWSP, "s")

    def code(self, code: str) -> list[Atom]:
        return wrap(text_atoms(code.replace("`", LOOKALIKES["`"])), ZWSP + "`", "`" + ZWSP, "code")

    def code_block(self, code: str, language: str) -> list[Atom]:
        return wrap(text_atoms(code.replace("```", "`" + ZWSP + "``")), "```\n", "\n```", "pre")

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        shown = "".join(atom.char for atom in inner)
        if shown in (url, url.removeprefix("mailto:")):
            return text_atoms(url)
        return [*inner, *text_atoms(f" ({url})")]


WHATSAPP = WhatsAppDialect()
