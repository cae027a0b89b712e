"""read_file on documents: a PDF's page ranges, a Word document's paragraphs and tables, the
size cap, and what is refused. The files are made here (a PDF written by hand, a DOCX with
python-docx), so the real libraries read them."""

from __future__ import annotations

import asyncio
import io
import os
import re
import struct
import time
import zipfile
import zlib
from pathlib import Path

import docx
import pytest

from bot.conversation import Conversation
from bot.tools import ToolContext, ToolError, documents
from bot.tools.files import read_file


def make_pdf(pages: list[str]) -> bytes:
    """A small PDF with one line of text (Helvetica) on each page, written by hand."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_of(objects)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "report.pdf").write_bytes(make_pdf([f"Page {n} of the report" for n in range(1, 8)]))
    doc = docx.Document()
    doc.add_paragraph("Minutes of the meeting")
    table = doc.add_table(rows=2, cols=2)
    for r, row in enumerate((("who", "what"), ("Ada", "budget"))):
        for c, text in enumerate(row):
            table.rows[r].cells[c].text = text
    doc.add_paragraph("Next meeting on Friday")
    doc.save(str(tmp_path / "inbox" / "minutes.docx"))
    return tmp_path


async def read(ws: Path, path: str, **kw: object) -> str:
    ctx = ToolContext(ws, Conversation.of_key("agent:main:telegram:dm:42"), "run-1", "main", "42")
    return await read_file.function(ctx, path=path, **kw)


async def test_a_pdf_page_range_is_read_as_text(ws: Path) -> None:
    out = await read(ws, "inbox/report.pdf", pages="3-4")
    assert "Page 3 of the report" in out and "Page 4 of the report" in out
    assert "Page 2 of" not in out and "Page 5 of" not in out
    assert out.splitlines()[0] == "     1\t--- page 3 ---"
    assert out.endswith("; pages 3-4 of 7; read more with pages=5-]")
    assert (await read(ws, "inbox/report.pdf", pages="7")).count("--- page") == 1
    whole = await read(ws, "inbox/report.pdf")
    assert whole.count("--- page") == 7 and whole.endswith("pages 1-7 of 7]")
    assert (await read(ws, "inbox/report.pdf", pages="6-")).endswith("pages 6-7 of 7]")


@pytest.mark.parametrize(("pages", "error"), [
    ("9", "the document has 7 pages; page 9 is past its end"),
    ("0-2", "is not a range of pages"),
    ("4-2", "is not a range of pages"),
    ("1,3", "one range"),
    ("first", "pages must look like"),
])
async def test_a_page_range_outside_the_pdf_or_malformed_is_refused(ws: Path, pages: str, error: str) -> None:
    with pytest.raises(ToolError, match=error):
        await read(ws, "inbox/report.pdf", pages=pages)


async def test_a_word_document_is_read_in_order_with_its_tables(ws: Path) -> None:
    out = await read(ws, "inbox/minutes.docx")
    assert [line.split("\t", 1)[1] for line in out.splitlines()[:4]] == [
        "Minutes of the meeting", "who | what", "Ada | budget", "Next meeting on Friday"]
    assert out.endswith("; Word document]")
    with pytest.raises(ToolError, match="pages is for PDF"):
        await read(ws, "inbox/minutes.docx", pages="1")


async def test_text_files_read_as_before_and_broken_or_big_documents_are_refused(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "notes.txt").write_text("one\ntwo\n")
    assert (await read(ws, "notes.txt")).splitlines()[:2] == ["     1\tone", "     2\ttwo"]
    with pytest.raises(ToolError, match="pages is for PDF"):
        await read(ws, "notes.txt", pages="1")
    (ws / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really")
    with pytest.raises(ToolError, match="could not be read as a PDF"):
        await read(ws, "broken.pdf")
    (ws / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ToolError, match="could not be read as a Word document"):
        await read(ws, "broken.docx")
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 100)
    with pytest.raises(ToolError, match="documents up to 100 B can be read"):
        await read(ws, "inbox/report.pdf")


# -- documents built to hurt: read in a bounded child process -------------------------------------

def zip_of(entries: list[tuple[str, bytes, int, int]]) -> bytes:
    """A ZIP written by hand from (name, raw deflate stream, CRC-32, inflated size) entries."""
    out, central = bytearray(), bytearray()
    for name, stream, crc, size in entries:
        fields = struct.pack("<HHHHHIII", 20, 0, 8, 0, 0, crc, len(stream), size)
        central += b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0,
                                                                                 len(out)) + name.encode()
        out += b"PK\x03\x04" + fields + struct.pack("<HH", len(name), 0) + name.encode() + stream
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), len(out), 0)
    return bytes(out + central + end)


def deflated(data: bytes) -> tuple[bytes, int, int]:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(), zlib.crc32(data), len(data)


def docx_bomb(megabytes: int) -> bytes:
    """A real Word document whose text is ``megabytes`` MB of spaces: each MB deflates to the same
    ~1 KB block, so the file is small and made without inflating it here."""
    minimal = docx.Document()
    minimal.add_paragraph("x")
    saved = io.BytesIO()
    minimal.save(saved)
    head = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats'
            b'.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t xml:space="preserve">')
    tail = b"</w:t></w:r></w:p></w:body></w:document>"
    chunk = b" " * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = packer.compress(head + chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)  # the window is all spaces: every MB alike
    last = packer.compress(tail) + packer.flush()
    crc = zlib.crc32(head + chunk)
    for _ in range(megabytes - 1):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(tail, crc)
    entries = []
    with zipfile.ZipFile(saved) as parts:
        for name in parts.namelist():
            if name == "word/document.xml":
                entries.append((name, first + again * (megabytes - 1) + last, crc,
                                len(head) + megabytes * len(chunk) + len(tail)))
            else:
                entries.append((name, *deflated(parts.read(name))))
    return zip_of(entries)


def slow_pdf(operators: int, pages: int) -> bytes:
    """A PDF of ``pages`` pages that share one small flate stream of ``operators`` text operators:
    10 KB that pypdf takes seconds a page to read."""
    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n" * operators, 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"]
    objects += [f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 "
                f"{4 + pages} 0 R >> >> >>".encode()] * pages
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_of(objects)


def huge_pdf(characters: int) -> bytes:
    """One page showing one string of ``characters`` letters, deflated: 30 KB that take pypdf ~450 MB."""
    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td (" + b"x" * characters + b") Tj ET", 9)
    return pdf_of([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                   b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
                   b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << "
                   b"/F1 5 0 R >> >> >>", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"])


def pdf_of(objects: list[bytes]) -> bytes:
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def readers() -> list[int]:
    """This process's children that run the document reader (the one kept waiting included)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"document_reader.py" in (entry / "cmdline").read_bytes() \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid()):
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


async def bounded_read(ws: Path, path: str, within: float) -> tuple[str, float]:
    """read_file's refusal of ``path`` and how long it took (the test fails past ``within``)."""
    started = time.monotonic()
    with pytest.raises(ToolError) as refused:
        await asyncio.wait_for(read(ws, path), within)
    return str(refused.value), time.monotonic() - started


async def test_a_zip_bomb_word_document_is_refused_quickly_before_it_is_inflated(ws: Path) -> None:
    (ws / "inbox" / "bomb.docx").write_bytes(docx_bomb(400))
    assert (ws / "inbox" / "bomb.docx").stat().st_size < 1024 * 1024
    error, took = await bounded_read(ws, "inbox/bomb.docx", 20)
    assert re.fullmatch(r"inbox/bomb\.docx would inflate to 401 MB from \d+ KB \(a part [\d,]+ times its compressed "
                        r"size\), so it was not opened: a Word document is read when it inflates to at most 256 MB, "
                        r"no part over 100 times its compressed size", error), error
    assert took < 3.0  # a reader to start and a ZIP directory to list; inflating it took seconds
    assert (await read(ws, "inbox/minutes.docx")).startswith("     1\tMinutes of the meeting")


async def test_a_document_that_takes_too_long_is_killed_at_the_timeout(ws: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "DOCUMENT_SECONDS", 2.0)
    (ws / "slow.pdf").write_bytes(slow_pdf(100_000, 50))  # ~7 s a page, 50 pages
    error, took = await bounded_read(ws, "slow.pdf", 20)
    assert error == ("slow.pdf took longer than 2 s to read, so its reading was stopped; it may be damaged or built "
                     "to be slow")
    assert 2.0 <= took < 4.0
    assert len(readers()) <= 1  # only the reader waiting for the next document
    assert "Page 3 of the report" in await read(ws, "inbox/report.pdf", pages="3")


async def test_a_document_that_needs_too_much_memory_is_stopped(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "DOCUMENT_MEMORY", 256 * 1024 * 1024)
    (ws / "huge.pdf").write_bytes(huge_pdf(30_000_000))  # 30 KB; ~450 MB and 19 s to read
    error, took = await bounded_read(ws, "huge.pdf", 20)
    assert error == "huge.pdf needs more than 256 MB of memory to read, so its reading was stopped"
    assert took < documents.DOCUMENT_SECONDS
    assert (await read(ws, "inbox/minutes.docx")).startswith("     1\tMinutes of the meeting")
