"""Model Markdown -> the HTML subset Telegram accepts with ``parse_mode=HTML``.

Pure functions. The Markdown is parsed once by markdown-it-py (CommonMark plus GFM tables
and strikethrough) and its syntax tree is walked to emit only tags Telegram knows:
``b i s code pre a blockquote``. Every ``< > &`` of content is escaped; raw HTML in the
Markdown is shown as text, never passed through.

A few Telegram entity rules shape the output: entities inside ``code``/``pre`` are not
possible (we only ever put escaped text there), a link cannot contain inline code (the
code is shown as plain text inside the link), and blockquotes cannot nest (inner quotes
are flattened into the outer one). Only ``http(s):``, ``tg:`` and ``mailto:`` links are
kept; any other link (``javascript:``, relative paths) keeps its text and loses the link.
"""

from __future__ import annotations

import html
import re
import textwrap
import unicodedata

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

__all__ = ["html_to_text", "render", "to_plain"]


def _accept_every_link(url: str) -> bool:
    # markdown-it would leave `[x](javascript:...)` unparsed, showing the raw Markdown;
    # we take every link token and apply our own allow-list in `_safe_url` instead.
    return True


_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_MD.validateLink = _accept_every_link  # type: ignore[method-assign]

_SAFE_SCHEMES = frozenset({"http", "https", "tg", "mailto"})
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*):")
_LANGUAGE = re.compile(r"[\w+#.-]+")
_WRAP = {"strong": "b", "em": "i", "s": "s"}
_LISTS = ("bullet_list", "ordered_list")
_PRE_BLOCKS = ("fence", "code_block", "table")
_TAG = re.compile(r"<[^>]*>")

HR = "———"
TABLE_MAX_WIDTH = 60  # characters of a table line before columns are narrowed and wrapped
TABLE_MIN_COLUMN = 6


def render(markdown: str) -> str:
    """Render model Markdown as Telegram HTML: well-formed, allowed tags only, escaped."""
    root = SyntaxTreeNode(_MD.parse(markdown))
    return _blocks(root.children, in_quote=False).strip("\n")


def html_to_text(html_text: str) -> str:
    """Strip tags and unescape entities: the plain-text fallback for a rendered chunk."""
    return html.unescape(_TAG.sub("", html_text))


def to_plain(markdown: str) -> str:
    """Markdown as the plain text a user would read (rendered, then tags stripped)."""
    return html_to_text(render(markdown))


# --- escaping and links ---------------------------------------------------------------

def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text: str) -> str:
    return _esc(text).replace('"', "&quot;")


def _safe_url(url: object) -> str | None:
    """The URL if its scheme is allowed, else None (relative links have no scheme)."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    match = _SCHEME.match(url)
    if match is None or match.group(1).lower() not in _SAFE_SCHEMES:
        return None
    return url


# --- blocks ---------------------------------------------------------------------------

def _blocks(nodes: list[SyntaxTreeNode], in_quote: bool) -> str:
    return "\n\n".join(part for node in nodes if (part := _block(node, in_quote)))


def _block(node: SyntaxTreeNode, in_quote: bool) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline(node.children[0]) if node.children else ""
    if kind == "heading":
        inner = _inline(node.children[0]) if node.children else ""
        return f"<b>{inner}</b>" if inner else ""
    if kind == "blockquote":
        inner = _blocks(node.children, in_quote=True)
        return inner if in_quote or not inner else f"<blockquote>{inner}</blockquote>"
    if kind in _LISTS:
        return "\n".join(_list_lines(node, 0, in_quote))
    if kind in ("fence", "code_block"):
        return _code_block(node.content, node.info)
    if kind == "hr":
        return HR
    if kind == "table":
        return _table(node)
    if kind == "html_block":
        return _esc(node.content.strip("\n"))
    return _esc(node.content)  # an unknown leaf block from a future markdown-it: as text


def _code_block(code: str, info: str) -> str:
    code = _esc(code.rstrip("\n"))
    match = _LANGUAGE.match(info.strip())
    if match is None:
        return f"<pre><code>{code}</code></pre>"
    return f'<pre><code class="language-{_attr(match.group(0))}">{code}</code></pre>'


def _list_lines(node: SyntaxTreeNode, depth: int, in_quote: bool) -> list[str]:
    """One line per item line: "• item" / "3. item", nested lists 2 spaces deeper."""
    ordered = node.type == "ordered_list"
    start = int(str(node.attrs.get("start", 1))) if ordered else 1
    indent = "  " * depth
    lines: list[str] = []
    for number, item in enumerate(node.children, start):
        marker = f"{number}. " if ordered else "• "
        first = True
        for child in item.children:
            if child.type in _LISTS or child.type in _PRE_BLOCKS:
                if first:  # an item that opens with a sub-list or a code block
                    lines.append(indent + marker.rstrip())
                    first = False
                if child.type in _LISTS:
                    lines.extend(_list_lines(child, depth + 1, in_quote))
                else:  # code keeps its own indentation: no prefix inside <pre>
                    lines.append(_block(child, in_quote))
                continue
            text = _block(child, in_quote)
            if not text:
                continue
            for line in text.split("\n"):
                lines.append(indent + (marker if first else " " * len(marker)) + line)
                first = False
        if first:
            lines.append(indent + marker.rstrip())
    return lines


# --- inline ---------------------------------------------------------------------------

def _inline(node: SyntaxTreeNode, in_link: bool = False) -> str:
    out: list[str] = []
    for child in node.children:
        kind = child.type
        if kind == "text":
            out.append(_esc(child.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            code = _esc(child.content)
            out.append(code if in_link else f"<code>{code}</code>")
        elif kind in _WRAP:
            inner = _inline(child, in_link)
            out.append(f"<{_WRAP[kind]}>{inner}</{_WRAP[kind]}>" if inner else "")
        elif kind == "link":
            href = _safe_url(child.attrs.get("href"))
            inner = _inline(child, in_link=True)
            if href is None or in_link:
                out.append(inner)
            else:
                out.append(f'<a href="{_attr(href)}">{inner or _esc(href)}</a>')
        elif kind == "image":
            alt = _esc(_plain(child) or "image")
            src = _safe_url(child.attrs.get("src"))
            out.append(alt if src is None or in_link else f'<a href="{_attr(src)}">{alt}</a>')
        else:  # html_inline and anything unknown: shown as text
            out.append(_esc(child.content))
    return "".join(out)


def _plain(node: SyntaxTreeNode) -> str:
    """Plain text of inline content (table cells, image alt text)."""
    parts: list[str] = []
    for child in node.children:
        if child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.children:
            parts.append(_plain(child))
        else:
            parts.append(child.content)
    return "".join(parts)


# --- tables ---------------------------------------------------------------------------

def _width(text: str) -> int:
    """Monospace columns: East Asian wide characters and most emoji take two."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or char in "\u200d\ufe0f":
            continue
        width += 2 if unicodedata.east_asian_width(char) in "WF" else 1
    return width


def _pad(text: str, width: int, align: str) -> str:
    gap = max(0, width - _width(text))
    if align == "right":
        return " " * gap + text
    if align == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


def _table(node: SyntaxTreeNode) -> str:
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:  # thead, tbody
        for row in section.children:
            cells = [" ".join(_plain(cell.children[0]).split()) if cell.children else ""
                     for cell in row.children]
            if not aligns:
                aligns = [str(cell.attrs.get("style", "")).removeprefix("text-align:")
                          for cell in row.children]
            rows.append(cells)
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    aligns += [""] * (columns - len(aligns))
    widths = [max(_width(row[i]) for row in rows) for i in range(columns)]
    budget = TABLE_MAX_WIDTH - 3 * (columns - 1)
    while sum(widths) > budget and max(widths) > TABLE_MIN_COLUMN:
        widths[widths.index(max(widths))] -= 1  # narrow the widest column, then wrap it
    lines: list[str] = []
    for index, row in enumerate(rows):
        wrapped = [textwrap.wrap(cell, max(1, width)) or [""] for cell, width in zip(row, widths)]
        for n in range(max(len(cell) for cell in wrapped)):
            parts = [_pad(cell[n] if n < len(cell) else "", width, align)
                     for cell, width, align in zip(wrapped, widths, aligns)]
            lines.append(" | ".join(parts).rstrip())
        if index == 0:
            lines.append("-+-".join("-" * width for width in widths))
    return "<pre>" + _esc("\n".join(lines)) + "</pre>"
