"""Uploads: the files people send, saved in the workspace's ``inbox/`` through the fence."""

from __future__ import annotations

import os
from pathlib import Path

from bot.workspace.fence import create_inside
from bot.workspace.layout import UNSAFE_CHARS

INBOX = "inbox"


def save_upload(workspace: Path, name: str, data: bytes) -> str:
    """Save a file the user sent into ``inbox/`` of the workspace (blocking: call it in a
    thread). The name is sanitised and never overwrites: ``report.pdf``, ``report-2.pdf``...
    The inbox is walked like every path inside a workspace (``create_inside``): an
    ``inbox`` link a command planted is followed only inside the workspace, and one leading
    out raises ``OutsideWorkspaceError``. Returns the path relative to the workspace."""
    clean = UNSAFE_CHARS.sub("_", Path(name).name).lstrip(".-") or "file"
    stem, dot, suffix = clean[:100].rpartition(".")
    if not dot:
        stem, suffix = clean[:100], ""
    for n in range(1, 1000):
        candidate = f"{stem}-{n}" if n > 1 else stem
        target = f"{candidate}.{suffix}" if suffix else candidate
        try:  # exclusive, and never through a link: never overwrite, never lead out
            fd, relative = create_inside(workspace, f"{INBOX}/{target}", 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return relative
    raise FileExistsError(f"too many files named {clean} in {INBOX}")
