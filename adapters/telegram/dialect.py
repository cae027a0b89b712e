"""Telegram's dialect: the HTML subset Telegram accepts with ``parse_mode=HTML``.

Pure: no SDK. Only ``b i s code pre a blockquote`` are written; every ``< > &`` of content
is escaped. A few Telegram entity rules shape the output: entities inside ``code``/``pre``
are not possible (only escaped text goes there), a link cannot contain inline code (the
walker gives it as plain text), and blockquotes cannot nest (the walker flattens them).

Telegram counts a message's length in UTF-16 code units of its text after entity
parsing: tags count nothing, ``&lt;`` counts one, 😀 counts two (``LIMITS``).
"""

from __future__ import annotations

import html
import re

from bot.channels import Atom, DialectBase, Limits, Measure, Role, text_atoms

__all__ = ["LIMITS", "TELEGRAM", "TELEGRAM_LIMIT", "TelegramDialect", "html_to_text"]

TELEGRAM_LIMIT = 4096
LIMITS = Limits(chunk=TELEGRAM_LIMIT, measure=Measure.UTF16)

_PIECES = re.compile(r"<[^>]*>|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);|[^<&]+|[<&]")
_TAG_NAME = re.compile(r"</?\s*([a-zA-Z][a-zA-Z0-9-]*)")
_TAG = re.compile(r"<[^>]*>")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text: str) -> str:
    return _esc(text).replace('"', "&quot;")


def html_to_text(html_text: str) -> str:
    """Strip tags and unescape entities: the plain-text fallback for a rendered chunk."""
    return html.unescape(_TAG.sub("", html_text))


class TelegramDialect(DialectBase):
    name = "telegram"

    def text(self, text: str) -> str:
        return _esc(text)

    def code_text(self, code: str) -> str:
        return _esc(code)

    def bold(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def italic(self, inner: str) -> str:
        return f"<i>{inner}</i>"

    def strike(self, inner: str) -> str:
        return f"<s>{inner}</s>"

    def code(self, code: str) -> str:
        return f"<code>{self.code_text(code)}</code>"

    def code_block(self, code: str, language: str) -> str:
        if not language:
            return f"<pre><code>{self.code_text(code)}</code></pre>"
        return f'<pre><code class="language-{_attr(language)}">{self.code_text(code)}</code></pre>'

    def link(self, inner: str, url: str) -> str:
        return f'<a href="{_attr(url)}">{inner}</a>'

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>"

    def table(self, lines: list[str]) -> str:
        return "<pre>" + self.code_text("\n".join(lines)) + "</pre>"

    def tokens(self, rendered: str) -> list[Atom]:
        atoms: list[Atom] = []
        for match in _PIECES.finditer(rendered):
            piece = match.group(0)
            if piece.startswith("<") and piece.endswith(">") and len(piece) > 2:
                name = _TAG_NAME.match(piece)
                if name is not None:
                    tag = name.group(1).lower()
                    if piece.startswith("</"):
                        atoms.append(Atom(piece, "", tag, Role.CLOSE))
                    else:
                        atoms.append(Atom(piece, "", tag, Role.OPEN, f"</{tag}>"))
                    continue
            if piece.startswith("&") and len(piece) > 1:
                char = html.unescape(piece)
                if len(char) == 1:  # else not an entity Telegram knows: leave it as text
                    atoms.append(Atom(piece, char))
                    continue
            atoms.extend(text_atoms(piece))
        return atoms

    def plain(self, rendered: str) -> str:
        return html_to_text(rendered)


TELEGRAM = TelegramDialect()
