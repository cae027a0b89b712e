"""The dashboard's static files, shipped in the package (``static/``) and served from memory.

Each is read once, at import, and named in pages with a digest of its content
(``/static/app.css?v=…``), so a browser may keep it for a year and still never shows an old
one after an upgrade. Only these files are served: nothing on disk is reachable by name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml", ".png": "image/png"}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    version: str


def _load() -> dict[str, Asset]:
    found = {}
    for file in sorted(STATIC.iterdir()):
        if file.is_file() and file.suffix in _TYPES:
            body = file.read_bytes()
            found[file.name] = Asset(body, _TYPES[file.suffix], hashlib.sha256(body).hexdigest()[:12])
    return found


ASSETS = _load()


def url(name: str) -> str:
    return f"/static/{name}?v={ASSETS[name].version}"
