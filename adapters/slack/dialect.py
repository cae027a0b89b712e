"""Slack's dialect: mrkdwn, the markup of a message's ``text``.

Pure: no SDK. Bold ``*x*``, italic ``_x_``, strike ``~x~``, inline code, ``` fences (no
language: Slack would show it as the first line of code), links ``<url|text>`` (their text
plain: Slack formats nothing inside), quotes as ``> `` lines, headings as bold lines, lists
as "• item" lines and tables as aligned code blocks.

Slack has no escape for its formatting characters. Our own markers are written with a
zero-width space on their outer side (``\\u200b*bold*\\u200b``): Slack then formats them
even next to a letter or punctuation (zero-width spaces of the model's own text are
dropped, so none makes an asterisk of text look like a marker). A backtick outside a code block
(in text or inside inline code, which cannot hold one) is shown as "ˋ", the modifier
letter that looks like it; otherwise it would open code. ``& < >`` are escaped
everywhere. User mentions and channel links the model writes (``<@U123>``, ``<#C123>``)
are kept; every other ``<...>`` is shown as text, so ``<!channel>``, ``<!here>``,
``<!everyone>`` and user-group pings never reach Slack as commands.

A message is at most 4,000 characters as sent (``SHAPE``).

A native stream (chat.appendStream) takes Markdown, not mrkdwn: ``ping_free`` defuses what
could ping there, and ``sendable`` tells how much of a stream's text can go before what
follows could complete such a token.
"""

from __future__ import annotations

import re

from bot.channels import Atom, Dialect, Measure, MessageShape, text_atoms, wrap

__all__ = ["SHAPE", "SLACK", "SlackDialect", "ping_free", "sendable"]

SHAPE = MessageShape(chunk=4000, measure=Measure.CHARS)

ZWSP = "\u200b"
GRAVE = "\u02cb"  # ˋ stands for a backtick outside code blocks: Slack has no escape for it
_MENTION = re.compile(r"<[@#][UWCG][A-Z0-9]+(?:\|[^<>|\n]*)?>")
_ESCAPES = {"&": Atom("&amp;", "&"), "<": Atom("&lt;", "<"), ">": Atom("&gt;", ">")}
_BREAK = Atom(ZWSP, ZWSP)
_REWRITTEN = re.compile("[\u200b`&<>]")  # what ``text`` changes


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


def _code(code: str) -> list[Atom]:
    """Code escaped, with no two backticks in a row (no fence can end it)."""
    atoms = text_atoms(code, _ESCAPES)
    if "``" not in code:
        return atoms
    out: list[Atom] = []
    for index, atom in enumerate(atoms):
        if atom.raw == "`" and index and atoms[index - 1].raw == "`":
            out.append(_BREAK)
        out.append(atom)
    return out


class SlackDialect(Dialect):
    name = "slack"
    link_markup = False
    block_openers = ""  # ">" is always sent as "&gt;"

    def text(self, text: str) -> list[Atom]:
        text = text.replace(ZWSP, "").replace("`", GRAVE)
        atoms: list[Atom] = []
        at = 0
        for match in _MENTION.finditer(text):  # a user or channel the model names stays one
            atoms.extend(text_atoms(text[at:match.start()], _ESCAPES))
            atoms.append(Atom(match.group(0), match.group(0)))
            at = match.end()
        atoms.extend(text_atoms(text[at:], _ESCAPES))
        return atoms

    def verbatim(self, text: str) -> bool:
        return _REWRITTEN.search(text) is None

    def _mark(self, marker: str, inner: list[Atom], tag: str) -> list[Atom]:
        return wrap(inner, ZWSP + marker, marker + ZWSP, tag)

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return self._mark("*", inner, "b")

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return self._mark("_", inner, "i")

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return self._mark("~", inner, "s")

    def code(self, code: str) -> list[Atom]:
        return wrap(text_atoms(code.replace("`", GRAVE), _ESCAPES), "`", "`", "code")

    def code_block(self, code: str, language: str) -> list[Atom]:
        return wrap(_code(code), "```\n", "\n```", "pre")

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        # no <...> inside <...>: a mention in the text is shown as text
        inner = [unit for atom in inner
                 for unit in (text_atoms(atom.raw, _ESCAPES) if _MENTION.fullmatch(atom.raw) else (atom,))]
        return wrap(inner, f"<{_esc(url).replace('|', '%7C')}|", ">", "a")


SLACK = SlackDialect()
