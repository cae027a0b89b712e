"""read_file on documents: a PDF's page ranges, a Word document's paragraphs and tables, the
size cap, and what is refused. The files are made here (a PDF written by hand, a DOCX with
python-docx), so the real libraries read them."""

from __future__ import annotations

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
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


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
