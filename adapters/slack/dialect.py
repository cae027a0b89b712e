"""Slack's dialect: mrkdwn, the markup of a message's ``text``.

Pure: no SDK. Bold ``*x*``, italic ``_x_``, strike ``~x~``, inline code, ``` fences (no
language: Slack would show it as the first line of code), links ``<url|text>`` (their text
plain: Slack formats nothing inside), quotes as ``> `` lines, headings as bold lines, lists
as "• item" lines and tables as aligned code blocks.

Slack has no escape for its formatting characters. Our own markers are written with a
zero-width space on their outer side (``\\u200b*bold*\\u200b``): Slack then formats them
even next to a letter or punctuation, and the splitter can tell them from an asterisk in
text (zero-width spaces of the model's own text are dropped). A backtick outside a code block
(in text or inside inline code, which cannot hold one) is shown as "ˋ", the modifier
letter that looks like it; otherwise it would open code. ``& < >`` are escaped
everywhere. User mentions and channel links the model writes (``<@U123>``, ``<#C123>``)
are kept; every other ``<...>`` is shown as text, so ``<!channel>``, ``<!here>``,
``<!everyone>`` and user-group pings never reach Slack as commands.

A message is at most 4,000 characters as sent (``LIMITS``).

A native stream (chat.appendStream) takes Markdown, not mrkdwn: ``ping_free`` defuses what
could ping there, and ``sendable`` tells how much of a stream's text can go before what
follows could complete such a token.
"""

from __future__ import annotations

import re

from bot.channels import Atom, DialectBase, Limits, Measure, Role, text_atoms

__all__ = ["LIMITS", "SLACK", "SlackDialect", "ping_free", "sendable"]

LIMITS = Limits(chunk=4000, measure=Measure.CHARS)

ZWSP = "\u200b"
GRAVE = "\u02cb"  # ˋ stands for a backtick outside code blocks: Slack has no escape for it
_MENTION = re.compile(r"<[@#][UWCG][A-Z0-9]+(?:\|[^<>|\n]*)?>")
_ENTITY = re.compile(r"&(?:amp|lt|gt);")
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">"}
_MARKERS = {"*": "b", "_": "i", "~": "s"}
_TEXT = re.compile("[^&\u200b*_~`<>\n]+")
_LINK = re.compile(r"<([^<>|\s]+)\|")


# In streamed Markdown, what could ping: Slack's <!here> <!channel> <!everyone> <!subteam^…> <@U…> <#C…>
# (also with the "<" as an entity), and a bare @here, @channel or @everyone.
_PING = re.compile(r"(?:<|&lt;|&#0*60;|&#[xX]0*3[cC];)(?=[!@#])|(?<![\w@])@(?=(?:here|channel|everyone)\b)")
_UNFINISHED = re.compile(r"(?:<|&[#\w]*;?|@\w*)\Z")  # what the next text could make one of them


def ping_free(markdown: str) -> str:
    """``markdown`` with a zero-width space after the ``<`` (or ``&lt;``) of every Slack special
    token and after the ``@`` of a bare ``@here``, ``@channel`` or ``@everyone``: no longer
    syntax to Slack (nor HTML to Markdown), so nobody is pinged, and it reads the same."""
    return _PING.sub(lambda found: found.group(0) + ZWSP, markdown)


def sendable(markdown: str) -> int:
    """How much of a stream's pending ``markdown`` can be sent now: all but a ``<``, an
    entity (``&lt;``, ``&#6``) or an ``@word`` at its end, which the next text could make a ping."""
    found = _UNFINISHED.search(markdown)
    return found.start() if found else len(markdown)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(code: str) -> str:
    """Code escaped, with no two backticks in a row (no fence can end it)."""
    code = _esc(code)
    while "``" in code:
        code = code.replace("``", f"`{ZWSP}`")
    return code


class SlackDialect(DialectBase):
    name = "slack"
    link_markup = False
    block_openers = ""  # ">" is always sent as "&gt;"

    def text(self, text: str) -> str:
        text = text.replace(ZWSP, "").replace("`", GRAVE)
        out: list[str] = []
        at = 0
        for match in _MENTION.finditer(text):  # a user or channel the model names stays one
            out.append(_esc(text[at:match.start()]))
            out.append(match.group(0))
            at = match.end()
        out.append(_esc(text[at:]))
        return "".join(out)

    def code_text(self, code: str) -> str:
        return _code(code)

    def _mark(self, marker: str, inner: str) -> str:
        return f"{ZWSP}{marker}{inner}{marker}{ZWSP}"

    def bold(self, inner: str) -> str:
        return self._mark("*", inner)

    def italic(self, inner: str) -> str:
        return self._mark("_", inner)

    def strike(self, inner: str) -> str:
        return self._mark("~", inner)

    def code(self, code: str) -> str:
        return f"`{_esc(code.replace('`', GRAVE))}`"

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{self.code_text(code)}\n```"

    def link(self, inner: str, url: str) -> str:
        inner = _MENTION.sub(lambda found: _esc(found.group(0)), inner)  # no <...> inside <...>
        return f"<{_esc(url).replace('|', '%7C')}|{inner}>"

    def tokens(self, rendered: str) -> list[Atom]:
        return _Reader(rendered).atoms


class _Reader:
    """Slack mrkdwn as written by ``SlackDialect``, read back as atoms."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: list[Atom] = []
        self.open: list[str] = []  # tags of open formatting, innermost last
        self.read()

    def push(self, raw: str, tag: str, close: str) -> None:
        self.open.append(tag)
        self.atoms.append(Atom(raw, "", tag, Role.OPEN, close))

    def pop(self, raw: str, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]
        self.atoms.append(Atom(raw, "", tag, Role.CLOSE))

    def read(self) -> None:
        text, atoms, at, end = self.text, self.atoms, 0, len(self.text)
        while at < end:
            if (at == 0 or text[at - 1] == "\n") and "a" not in self.open:
                if text.startswith("> ", at):
                    atoms.append(Atom("> ", "", "quote", Role.PREFIX))
                    at += 2
                    continue
                if text.startswith("```\n", at):
                    at = self.code("```\n", "pre", "\n```", at + 4)
                    continue
            char = text[at]
            if char == "&" and (entity := _ENTITY.match(text, at)) is not None:
                atoms.append(Atom(entity.group(0), _ENTITIES[entity.group(0)]))
                at = entity.end()
            elif char == ZWSP and at + 1 < end and text[at + 1] in _MARKERS:
                self.push(text[at:at + 2], _MARKERS[text[at + 1]], text[at + 1] + ZWSP)
                at += 2
            elif char in _MARKERS and text.startswith(ZWSP, at + 1) and _MARKERS[char] in self.open:
                self.pop(char + ZWSP, _MARKERS[char])
                at += 2
            elif char == "`":
                at = self.code("`", "code", "`", at + 1)
            elif char == "<" and (mention := _MENTION.match(text, at)) is not None:
                atoms.append(Atom(mention.group(0), mention.group(0)))
                at = mention.end()
            elif char == "<" and (link := _LINK.match(text, at)) is not None:
                self.push(link.group(0), "a", ">")
                at = link.end()
            elif char == ">" and "a" in self.open:
                self.pop(">", "a")
                at += 1
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
        for entity_or_char in re.finditer(r"&(?:amp|lt|gt);|[\s\S]", self.text[at:stop]):
            piece = entity_or_char.group(0)
            self.atoms.append(Atom(piece, _ENTITIES[piece]) if len(piece) > 1 else text_atoms(piece)[0])
        if stop < len(self.text):
            self.pop(closer, tag)
        return stop + len(closer)


SLACK = SlackDialect()
