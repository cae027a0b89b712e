"""Reads one document's text in a process of its own, for ``bot.tools.documents``.

Run as a script (``python -E -P document_reader.py``), it imports nothing of chatgate, only the
standard library and the readers (pypdf, python-docx), and those before it is asked
anything, so a process kept waiting answers at once. It reads one request from stdin, a
JSON line (``kind``, ``shown``, ``pages``, ``memory``, ``seconds``) followed by the
document's bytes, bounds itself (``RLIMIT_AS`` to ``memory`` bytes, ``RLIMIT_CPU`` to
``seconds`` more), answers one JSON object on stdout, ``{"text", "where"}`` or
``{"error"}`` (a sentence for the model), and exits. The parent kills it at its timeout.

A Word document is a ZIP: its central directory (the list at its end, read without
inflating anything) must promise at most ``MAX_INFLATED`` bytes in all and no part bigger
than ``MAX_RATIO`` times its compressed size, or it is not opened; ``zipfile`` then never
inflates a part past the size it promised.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import resource
import sys
import zipfile
from typing import Any

MAX_PAGES = 50  # PDF pages read in one call
MAX_INFLATED = 256 * 1024 * 1024  # a Word document's parts, inflated, in all
MAX_RATIO = 100  # a part bigger than 1 MB inflated may be at most this many times its compressed size
MAX_PARTS = 10_000
MAX_TEXT_CHARS = 8_000_000  # text handed back (read_file shows 40,000 characters a call)
_RATIO_FROM = 1024 * 1024
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


class Refused(Exception):
    """A sentence for the model: why the document was not read."""


def page_range(pages: str, total: int) -> range:
    """``"3"``, ``"3-5"`` or ``"3-"`` (to the end) as 0-based page indexes of a ``total``-page file."""
    if not pages.strip():
        return range(0, min(total, MAX_PAGES))
    match = _RANGE.match(pages)  # a list ("3,5") does not match: one range at a time
    if match is None:
        raise Refused(f"pages must look like 3, 3-5 or 3- (one range), not {pages!r}")
    first = int(match.group(1))
    last = total if match.group(2) == "" else int(match.group(2) or first)
    if first < 1 or last < first:
        raise Refused(f"pages {pages!r} is not a range of pages; they are numbered from 1")
    if first > total:
        raise Refused(f"the document has {total} page{'s' if total != 1 else ''}; page {first} is past its end")
    return range(first - 1, min(last, total, first - 1 + MAX_PAGES))


def zip_problem(data: bytes, shown: str) -> str | None:
    """Why a ZIP would inflate to too much to open (its central directory says), or None."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        return f"{shown} could not be read as a Word document ({type(exc).__name__}: {exc})"
    if len(parts) > MAX_PARTS:
        return f"{shown} holds {len(parts):,} files; a Word document may hold up to {MAX_PARTS:,}"
    inflated = sum(p.file_size for p in parts)
    ratio = max((p.file_size / max(p.compress_size, 1) for p in parts if p.file_size > _RATIO_FROM), default=0.0)
    if inflated > MAX_INFLATED or ratio > MAX_RATIO:
        return (f"{shown} would inflate to {_size(inflated)} from {_size(len(data))} (a part {ratio:,.0f} times its "
                f"compressed size), so it was not opened: a Word document is read when it inflates to at most "
                f"{_size(MAX_INFLATED)}, no part over {MAX_RATIO} times its compressed size")
    return None


def pdf_text(data: bytes, shown: str, pages: str) -> tuple[str, str]:
    """(the text of the pages asked for, each under a ``--- page N ---`` line; a closing note)."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Refused(f"{shown} is an encrypted PDF; it cannot be read without its password")
        total = len(reader.pages)
        wanted = page_range(pages, total)
        texts = [f"--- page {i + 1} ---\n{(reader.pages[i].extract_text() or '').strip()}" for i in wanted]
    except (Refused, MemoryError):
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError, AttributeError) as exc:
        raise Refused(f"{shown} could not be read as a PDF ({type(exc).__name__}: {exc})") from None
    more = f"; read more with pages={wanted.stop + 1}-" if wanted.stop < total else ""
    return "\n\n".join(texts), f"pages {wanted.start + 1}-{wanted.stop} of {total}{more}"


def docx_text(data: bytes, shown: str) -> str:
    """The paragraphs and tables of a Word document, in order (a table row as ``a | b | c``)."""
    if (problem := zip_problem(data, shown)) is not None:
        raise Refused(problem)
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
    except MemoryError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, SyntaxError, RecursionError) as exc:
        raise Refused(f"{shown} could not be read as a Word document ({type(exc).__name__}: {exc})") from None
    return "\n".join(lines)


def answer(request: dict[str, Any], data: bytes) -> dict[str, str]:
    shown = str(request["shown"])
    try:
        if request["kind"] == "pdf":
            text, where = pdf_text(data, shown, str(request["pages"]))
        else:
            text, where = docx_text(data, shown), "Word document"
    except Refused as exc:
        return {"error": str(exc)}
    except MemoryError:
        return {"error": f"{shown} needs more than {_size(int(request['memory']))} of memory to read, so its "
                         "reading was stopped"}
    if len(text) > MAX_TEXT_CHARS:
        text = f"{text[:MAX_TEXT_CHARS]}\n[the text is cut here, at {MAX_TEXT_CHARS:,} characters]"
    return {"text": text, "where": where}


def _size(n: int) -> str:
    return f"{n / 1048576:,.0f} MB" if n >= 1048576 else f"{n / 1024:,.0f} KB"


def _bound(memory: int, seconds: float) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(used.ru_utime + used.ru_stime + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # the parent's timeout comes first; this if it is gone


def main() -> None:
    import docx  # noqa: F401  (loaded before the request: a waiting reader answers at once)
    import pypdf  # noqa: F401

    logging.disable(logging.WARNING)  # pypdf's warnings about a damaged file are not for anyone here

    line = sys.stdin.buffer.readline()
    if not line:
        return  # the bot went away before asking
    request = json.loads(line)
    _bound(int(request["memory"]), float(request["seconds"]))
    try:
        reply = answer(request, sys.stdin.buffer.read())
    except MemoryError:
        reply = {"error": f"{request['shown']} needs more than {_size(int(request['memory']))} of memory to read"}
    sys.stdout.buffer.write(json.dumps(reply).encode())
    sys.stdout.buffer.flush()
    os._exit(0)  # done: tearing down the interpreter and its libraries would only keep the bot waiting


if __name__ == "__main__":
    main()
