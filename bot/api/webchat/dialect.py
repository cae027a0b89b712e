"""HTML as the web chat shows an answer: the walker's structure in a few safe tags.

Every character of text is escaped (``&``, ``<``, ``>``, ``"``, ``'``), so nothing the model
writes, ``<script>`` included, is ever markup; the tags are the dialect's own, and a link's
address is one the walker's allow-list passed (http, https, mailto), written escaped in a
quoted attribute that opens in a new tab without the page's context.
"""

from __future__ import annotations

import html

from bot.channels.dialect import Atom, Dialect, Mark, text_atoms, wrap

_ESCAPES = {c: Atom(html.escape(c, quote=True), c) for c in "&<>\"'"}


class HtmlDialect(Dialect):
    name = "html"
    hr = "———"

    def text(self, text: str) -> list[Atom]:
        return [*text_atoms(text, _ESCAPES)]

    def bold(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<strong>", "</strong>", "b")

    def italic(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<em>", "</em>", "i")

    def strike(self, inner: list[Atom]) -> list[Atom]:
        return wrap(inner, "<s>", "</s>", "s")

    def code(self, code: str) -> list[Atom]:
        return wrap(self.text(code), "<code>", "</code>", "code")

    def code_block(self, code: str, language: str) -> list[Atom]:
        return wrap(self.text(code.rstrip("\n")), "<pre><code>", "</code></pre>", "pre")

    def link(self, inner: list[Atom], url: str) -> list[Atom]:
        opener = f'<a href="{html.escape(url, quote=True)}" rel="noopener noreferrer nofollow" target="_blank">'
        return wrap(inner, opener, "</a>", "a")

    def quote(self, inner: list[Atom]) -> list[Atom]:
        return [Atom("<blockquote>", "", "quote", Mark.OPEN, "</blockquote>"), *inner,
                Atom("</blockquote>", "", "quote", Mark.CLOSE)]


HTML = HtmlDialect()
