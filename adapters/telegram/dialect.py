"""Telegram's dialect: the HTML subset Telegram accepts with ``parse_mode=HTML``.

Pure: no SDK. Only ``b i s code pre a blockquote`` are written; every ``< > &`` of content
is escaped. A few Telegram entity rules shape the output: entities inside ``code``/``pre``
are not possible (only escaped text goes there), a link cannot contain inline code (the
walker gives it as plain text), and blockquotes cannot nest (the walker flattens them).

Telegram counts a message's length in UTF-16 code units of its text after entity
parsing: tags count nothing, ``&lt;`` counts one, 😀 counts two (``SHAPE``).
"""

from __future__ import annotations

import html
import re

from bot.channels import Atom, Dialect, Measure, MessageShape, text_atoms, wrap

__all__ = ["SHAPE", "TELEGRAM", "TELEGRAM_LIMIT", "TelegramDialect", "html_to_text"]

TELEGRAM_LIMIT = 4096
SHAPE = MessageShape(chunk=TELEGRAM_LIMIT, measure=Measure.UTF16)

_ESCAPES = {char: Atom(html.escape(char, quote=False), char) for char in "&<>"}  # an entity counts one
_TAG = re.compile(r"<[^>]*>")


def _attr(text: str) -> str:
    return html.escape(text, quote=False).replace('"', "&quot;")


def html_to_text(html_text: str) -> str:
    """Strip tags and unescape entities: the plain-text fallback for a chunk Telegram refused."""
    return html.unescape(_TAG.sub("", html_text))


class TelegramDialect(Dialect):
    name = "telegram"

    def text(self, text: str) -> list[Atom]:
        return text_atoms(text, _ESCAPES)

    def verbatim(self, text: str) -> bool:
        return not ("&" in text or "<" in text or ">" in text)

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<b>", "</b>", "b")

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<i>", "</i>", "i")

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<s>", "</s>", "s")

    def code(self, code: str) -> list[Atom]:
        return wrap(self.text(code), "<code>", "</code>", "code")

    def code_block(self, code: str, language: str) -> list[Atom]:
        opener = f'<code class="language-{_attr(language)}">' if language else "<code>"
        return wrap(wrap(self.text(code), opener, "</code>", "code"), "<pre>", "</pre>", "pre")

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        return wrap(inner, f'<a href="{_attr(url)}">', "</a>", "a")

    def quote(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<blockquote>", "</blockquote>", "blockquote")

    def table(self, lines: list[str]) -> list[Atom]:
        return wrap(self.text("\n".join(lines)), "<pre>", "</pre>", "pre")


TELEGRAM = TelegramDialect()
