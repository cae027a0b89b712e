"""Documents as text for read_file: PDF (a page range at a time) and Word (DOCX).

pypdf and python-docx do the reading, in a child process of its own for each document
(``document_reader``): its address space is bounded (``DOCUMENT_MEMORY``) and it is killed at
``DOCUMENT_SECONDS``, under read_file's own limit, so no document, a ZIP bomb or a PDF that takes
minutes to parse, can take the bot's memory or a core for longer than the tool may run. One
reader is started ahead and waits with its libraries loaded, so a document is read in about
the time the libraries take, not that plus starting Python.

A PDF is known by its content (``%PDF-``), a Word document by its ZIP header and its name.
Blocking: the caller runs these in a thread. Problems are ``ToolError`` sentences.
"""

from __future__ import annotations

import atexit
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Literal

from bot.tools.base import ToolError

Kind = Literal["pdf", "docx"]
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # larger documents are not opened
DOCUMENT_SECONDS = 20.0  # one document's reading; read_file's own limit is 30 s (ToolCategory.FILE)
DOCUMENT_MEMORY = 1024 * 1024 * 1024  # the reader's address space, the Python it runs included
_READER = Path(__file__).with_name("document_reader.py")

_spare: subprocess.Popen[bytes] | None = None  # a reader started ahead, its libraries loaded
_spare_lock = threading.Lock()


def kind_of(head: bytes, name: str) -> Kind | None:
    """``pdf`` or ``docx`` when the file's first bytes (and, for a ZIP, its name) say so."""
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04") and name.lower().endswith((".docx", ".docm")):
        return "docx"
    return None


def read_text(kind: Kind, data: bytes, shown: str, pages: str) -> tuple[str, str]:
    """(text, closing note) of one document, from its reader: a PDF's pages asked for, each under a
    ``--- page N ---`` line; a Word document's paragraphs and tables in order (a table row as
    ``a | b | c``). A ``ToolError`` for its refusal, its timeout or its death."""
    request = {"kind": kind, "shown": shown, "pages": pages, "memory": DOCUMENT_MEMORY, "seconds": DOCUMENT_SECONDS}
    reader = _take_reader()
    try:
        out, err = reader.communicate(json.dumps(request).encode() + b"\n" + data, timeout=DOCUMENT_SECONDS)
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.communicate()
        raise ToolError(f"{shown} took longer than {DOCUMENT_SECONDS:g} s to read, so its reading was stopped; "
                        "it may be damaged or built to be slow") from None
    finally:
        _start_spare()
    try:
        answer = json.loads(out)
    except ValueError:
        raise ToolError(f"{shown} could not be read: its reader {_ended(reader.returncode)} (it may need more than "
                        f"{DOCUMENT_MEMORY // 1048576:,} MB of memory){_last_line(err)}") from None
    if "error" in answer:
        raise ToolError(str(answer["error"]))
    return answer["text"], answer["where"]


def _take_reader() -> subprocess.Popen[bytes]:
    global _spare
    with _spare_lock:
        reader, _spare = _spare, None
    if reader is None or reader.poll() is not None:
        reader = _start()
    return reader


def _start_spare() -> None:
    global _spare
    with _spare_lock:
        if _spare is None:
            _spare = _start()


def _start() -> subprocess.Popen[bytes]:
    # -E -P: no PYTHON* variables, not the script's folder on the path (its neighbours are
    # chatgate's modules); nothing of the bot's environment (its keys) either
    return subprocess.Popen([sys.executable, "-E", "-P", "-X", "utf8", str(_READER)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={})


@atexit.register
def _stop_spare() -> None:
    """The waiting reader goes when the bot does (it would on its own: its stdin closes)."""
    with _spare_lock:
        if _spare is not None and _spare.poll() is None:
            _spare.kill()
            _spare.wait()


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was stopped by {signal.Signals(-code).name}"
        except ValueError:
            return f"was stopped by signal {-code}"
    return f"ended with exit code {code}"


def _last_line(err: bytes) -> str:
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return f": {lines[-1][:200]}" if lines else ""
