"""Model Markdown -> a platform's message format: one walker, a ``Dialect`` per platform.

The Markdown is parsed once by markdown-it-py (CommonMark plus GFM tables and
strikethrough) and its syntax tree is walked here; a dialect supplies the atoms (how bold,
a link, a code block, a quote ... are written, and how text is escaped), so Telegram HTML,
Slack mrkdwn, Discord Markdown and the terminal's plain text share every decision about
structure: lists become "• item" / "3. item" lines, headings bold lines (or the dialect's
own), nested quotes are flattened into one, tables are laid out as aligned monospace lines,
raw HTML is shown as text, and only ``http(s):``, ``tg:`` and ``mailto:`` links are kept
(any other link keeps its text and loses the link).

The walk gives ``Atom``s (``render_atoms``), the rendered text is their ``raw`` joined
(``render``), and the splitter (``bot.outbound.split``) cuts between them: no dialect reads
its own text back. The dialect interface is the port's (``bot.channels.dialect``: platform
packages write their dialects against it).
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from bot.channels import PLAIN, Atom, Dialect, Mark, text_atoms

__all__ = ["TABLE_MAX_WIDTH", "language_of", "plain_line", "render", "render_atoms", "safe_url", "table_lines",
           "to_plain", "width"]


class _EveryLink(MarkdownIt):
    def validateLink(self, url: str) -> bool:
        # markdown-it would leave `[x](javascript:...)` unparsed, showing the raw Markdown;
        # we take every link token and apply our own allow-list in `safe_url` instead.
        return True


_MD = _EveryLink("commonmark").enable(["table", "strikethrough"])

_SAFE_SCHEMES = frozenset({"http", "https", "tg", "mailto"})
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*):")
_LANGUAGE = re.compile(r"[\w+#.-]+")
_STYLES = ("strong", "em", "s")
_LISTS = ("bullet_list", "ordered_list")
_PRE_BLOCKS = ("fence", "code_block", "table")

TABLE_MAX_WIDTH = 60  # characters of a table line before columns are narrowed and wrapped
TABLE_MIN_COLUMN = 6


# One line that no Markdown rule would touch: no inline markup character anywhere, and no
# block marker (heading, quote, list, rule, setext, table, indented code) at its start.
_INLINE_MARKUP = re.compile(r"[\\`*_\[\]<>&~\n\r\t\x00]")
_BLOCK_START = re.compile(r" {0,3}(?:[#>+=|-]|\d{1,9}[.)])| {4}")


def plain_line(markdown: str) -> str | None:
    """``markdown`` as the text it shows when it is a single line free of Markdown, else
    None: most short answers, which then skip the parser (rendering gives the same)."""
    if _INLINE_MARKUP.search(markdown) or _BLOCK_START.match(markdown):
        return None
    return markdown.strip()


def render_atoms(markdown: str, dialect: Dialect) -> list[Atom]:
    """Render model Markdown in ``dialect`` as atoms: only its own markup, everything else escaped."""
    if (line := plain_line(markdown)) is not None:
        return dialect.text(line)
    root = SyntaxTreeNode(_MD.parse(markdown))
    return _strip_lines(_Walker(dialect).blocks(root.children, in_quote=False))


def render(markdown: str, dialect: Dialect) -> str:
    """Render model Markdown in ``dialect``: the text of ``render_atoms``."""
    if (line := plain_line(markdown)) is not None and dialect.verbatim(line):
        return line
    return "".join([atom.raw for atom in render_atoms(markdown, dialect)])


def to_plain(markdown: str) -> str:
    """Markdown as the plain text a user would read (the terminal's rendering)."""
    return render(markdown, PLAIN)


def safe_url(url: object) -> str | None:
    """The URL if its scheme is allowed, else None (relative links have no scheme)."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    match = _SCHEME.match(url)
    return url if match is not None and match.group(1).lower() in _SAFE_SCHEMES else None


def language_of(info: str) -> str:
    """The language word of a fence's info string ("" when there is none)."""
    match = _LANGUAGE.match(info.strip())
    return match.group(0) if match else ""


_NEWLINE = Atom("\n", "\n")
_BLANK_LINE = [_NEWLINE, _NEWLINE]


def _strip_lines(atoms: list[Atom]) -> list[Atom]:
    """``atoms`` without line breaks at either end."""
    start, end = 0, len(atoms)
    while start < end and atoms[start] == _NEWLINE:
        start += 1
    while end > start and atoms[end - 1] == _NEWLINE:
        end -= 1
    return atoms if (start, end) == (0, len(atoms)) else atoms[start:end]


def _joined(parts: list[list[Atom]], between: list[Atom]) -> list[Atom]:
    out: list[Atom] = []
    for part in parts:
        if out:
            out.extend(between)
        out.extend(part)
    return out


def _led(atoms: list[Atom], lead: str, pad: str) -> list[Atom]:
    """The lines of ``atoms`` behind ``lead`` (the first) and ``pad`` (the others), as a list
    item's lines: a line prefix after them (a quote's "> ") is no longer at a line's start,
    so it is text, and the lines of a code block (in a quote in the item) are padded too,
    where its fences hold the line breaks in their markup."""
    out = text_atoms(lead)
    if atoms[0].mark is not Mark.PREFIX and not any("\n" in atom.raw for atom in atoms):  # one line: most items
        out.extend(atoms)
        return out
    pad_atoms = text_atoms(pad)
    line_start = True
    for atom in atoms:
        if atom.mark is Mark.PREFIX and line_start:
            out.extend(text_atoms(atom.raw))
            continue
        line_start = False
        if atom == _NEWLINE:
            out.append(atom)
            out.extend(pad_atoms)
            line_start = True
        elif atom.mark and atom.raw.endswith("\n"):  # an opening fence: the pad of its first line is code
            out.append(atom._replace(raw=atom.raw[:-1].replace("\n", "\n" + pad) + "\n"))
            out.extend(pad_atoms)
        elif atom.mark and "\n" in atom.raw:  # a closing fence
            out.append(atom._replace(raw=atom.raw.replace("\n", "\n" + pad)))
        else:
            out.append(atom)
    return out


class _Walker:
    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    # --- blocks -------------------------------------------------------------------------

    def blocks(self, nodes: list[SyntaxTreeNode], in_quote: bool) -> list[Atom]:
        return _joined([part for node in nodes if (part := self.block(node, in_quote))], _BLANK_LINE)

    def block(self, node: SyntaxTreeNode, in_quote: bool) -> list[Atom]:
        d, kind = self.d, node.type
        if kind == "paragraph":
            return self.inline(node.children[0]) if node.children else []
        if kind == "heading":
            inner = self.inline(node.children[0]) if node.children else []
            return d.heading(inner, int(node.tag[1:])) if inner else []
        if kind == "blockquote":
            inner = self.blocks(node.children, in_quote=True)
            return inner if in_quote or not inner else d.quote(inner)
        if kind in _LISTS:
            return _joined(self.list_lines(node, 0, in_quote), [_NEWLINE])
        if kind in ("fence", "code_block"):
            return d.code_block(node.content.rstrip("\n"), language_of(node.info))
        if kind == "hr":
            return text_atoms(d.hr)
        if kind == "table":
            lines = table_lines(node)
            return d.table(lines) if lines else []
        if kind == "html_block":
            return d.text(node.content.strip("\n"))
        return d.text(node.content)  # an unknown leaf block from a future markdown-it: as text

    def list_lines(self, node: SyntaxTreeNode, depth: int, in_quote: bool) -> list[list[Atom]]:
        """One entry per item line (or block of lines): "• item" / "3. item", nested lists 2
        spaces deeper."""
        ordered = node.type == "ordered_list"
        start = int(str(node.attrs.get("start", 1))) if ordered else 1
        indent = "  " * depth
        lines: list[list[Atom]] = []
        for number, item in enumerate(node.children, start):
            marker = self.d.item(number if ordered else None)
            pad = indent + " " * len(marker)
            first = True
            for child in item.children:
                if child.type in _LISTS or child.type in _PRE_BLOCKS:
                    if first:  # an item that opens with a sub-list or a code block
                        lines.append(text_atoms(indent + marker.rstrip()))
                        first = False
                    if child.type in _LISTS:
                        lines.extend(self.list_lines(child, depth + 1, in_quote))
                    else:  # code keeps its own indentation: no prefix inside a code block
                        lines.append(self.block(child, in_quote))
                    continue
                atoms = self.block(child, in_quote)
                if not atoms:
                    continue
                lines.append(_led(atoms, indent + marker if first else pad, pad))
                first = False
            if first:
                lines.append(text_atoms(indent + marker.rstrip()))
        return lines

    # --- inline -------------------------------------------------------------------------

    def inline(self, node: SyntaxTreeNode, in_link: bool = False, styles: frozenset[str] = frozenset()) -> list[Atom]:
        d = self.d
        out: list[Atom] = []
        for child in node.children:
            kind = child.type
            if kind == "text":
                out.extend(d.text(child.content))
            elif kind in ("softbreak", "hardbreak"):
                out.append(_NEWLINE)
            elif kind == "code_inline":
                out.extend(d.text(child.content) if in_link else d.code(child.content))
            elif kind in _STYLES:
                inner = self.inline(child, in_link, styles | {kind})
                if not inner or kind in styles:  # empty, or the same style inside itself
                    out.extend(inner)
                else:
                    out.extend(d.bold(inner) if kind == "strong" else d.italic(inner) if kind == "em"
                               else d.strike(inner))
            elif kind == "link":
                href = safe_url(child.attrs.get("href"))
                inner = self.inline(child, True, styles)
                if href is None or in_link:
                    out.extend(inner)
                else:
                    inner = inner if d.link_markup else d.text(plain_of(child))
                    out.extend(d.link(inner or d.text(href), href))
            elif kind == "image":
                alt = d.text(plain_of(child) or "image")
                src = safe_url(child.attrs.get("src"))
                out.extend(alt if src is None or in_link else d.link(alt, src))
            else:  # html_inline and anything unknown: shown as text
                out.extend(d.text(child.content))
        return out


def plain_of(node: SyntaxTreeNode) -> str:
    """Plain text of inline content (table cells, image alt text, link text)."""
    parts: list[str] = []
    for child in node.children:
        if child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.children:
            parts.append(plain_of(child))
        else:
            parts.append(child.content)
    return "".join(parts)


# --- tables -------------------------------------------------------------------------------

def width(text: str) -> int:
    """Monospace columns: East Asian wide characters and most emoji take two, combining marks
    and the zero-width joiner and variation selector none."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1
               for char in text if not (unicodedata.combining(char) or char in "\u200d\ufe0f"))


def _pad(text: str, columns: int, align: str) -> str:
    gap = max(0, columns - width(text))
    if align == "right":
        return " " * gap + text
    if align == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


def table_lines(node: SyntaxTreeNode) -> list[str]:
    """A table as aligned lines of plain text, at most TABLE_MAX_WIDTH wide when it can be."""
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:  # thead, tbody
        for row in section.children:
            cells = [" ".join(plain_of(cell.children[0]).split()) if cell.children else ""
                     for cell in row.children]
            if not aligns:
                aligns = [str(cell.attrs.get("style", "")).removeprefix("text-align:")
                          for cell in row.children]
            rows.append(cells)
    if not rows:
        return []
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    aligns += [""] * (columns - len(aligns))
    widths = [max(width(row[i]) for row in rows) for i in range(columns)]
    budget = TABLE_MAX_WIDTH - 3 * (columns - 1)
    while sum(widths) > budget and max(widths) > TABLE_MIN_COLUMN:
        widths[widths.index(max(widths))] -= 1  # narrow the widest column, then wrap it
    lines: list[str] = []
    for index, texts in enumerate(rows):
        wrapped = [textwrap.wrap(cell, max(1, w)) or [""] for cell, w in zip(texts, widths)]
        for n in range(max(len(cell) for cell in wrapped)):
            parts = [_pad(cell[n] if n < len(cell) else "", w, align)
                     for cell, w, align in zip(wrapped, widths, aligns)]
            lines.append(" | ".join(parts).rstrip())
        if index == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return lines
