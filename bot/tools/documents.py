"""Documents as text for read_file: PDF (a page range at a time) and Word (DOCX).

Well-kept libraries do the reading (pypdf, python-docx), imported when a document is first
read. A file is a document by its content (``%PDF-``; a ZIP holding ``word/document.xml``),
not only by its name. Blocking: the caller runs these in a thread. Problems are
``ToolError`` sentences: an encrypted PDF, a damaged file, a page range outside the file.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Literal

from bot.tools.base import ToolError

Kind = Literal["pdf", "docx"]
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # larger documents are not opened
MAX_PAGES = 50  # PDF pages read in one call
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


def kind_of(head: bytes, name: str) -> Kind | None:
    """``pdf`` or ``docx`` when the file's first bytes (and, for a ZIP, its name) say so."""
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04") and name.lower().endswith((".docx", ".docm")):
        return "docx"
    return None


def page_range(pages: str, total: int) -> range:
    """``"3"``, ``"3-5"`` or ``"3-"`` (to the end) as 0-based page indexes of a ``total``-page file."""
    if not pages.strip():
        return range(0, min(total, MAX_PAGES))
    parts = [_RANGE.match(part) for part in pages.split(",")]
    if len(parts) != 1 or parts[0] is None:
        raise ToolError(f"pages must look like 3, 3-5 or 3- (one range), not {pages!r}")
    first = int(parts[0].group(1))
    last = total if parts[0].group(2) == "" else int(parts[0].group(2) or first)
    if first < 1 or last < first:
        raise ToolError(f"pages {pages!r} is not a range of pages; they are numbered from 1")
    if first > total:
        raise ToolError(f"the document has {total} page{'s' if total != 1 else ''}; page {first} is past its end")
    return range(first - 1, min(last, total, first - 1 + MAX_PAGES))


def pdf_text(data: bytes, shown: str, pages: str) -> tuple[str, str]:
    """(the text of the pages asked for, each under a ``--- page N ---`` line; a closing note)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolError(f"{shown} is an encrypted PDF; it cannot be read without its password")
        total = len(reader.pages)
        wanted = page_range(pages, total)
        texts = [f"--- page {i + 1} ---\n{(reader.pages[i].extract_text() or '').strip()}" for i in wanted]
    except ToolError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ToolError(f"{shown} could not be read as a PDF ({type(exc).__name__}: {exc})") from None
    more = f"; read more with pages={wanted.stop + 1}-" if wanted.stop < total else ""
    return "\n\n".join(texts), f"pages {wanted.start + 1}-{wanted.stop} of {total}{more}"


def docx_text(data: bytes, shown: str) -> str:
    """The paragraphs and tables of a Word document, in order (a table row as ``a | b | c``)."""
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                lines += [" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows]
            else:
                lines.append(block.text)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ToolError(f"{shown} could not be read as a Word document ({type(exc).__name__}: {exc})") from None
    return "\n".join(lines)
