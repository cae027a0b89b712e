"""Per-user workspaces: where a session's files live, and the fence around them."""

from __future__ import annotations

import os
from pathlib import Path


class OutsideWorkspaceError(PermissionError):
    """A path that resolves (symlinks followed) to somewhere outside the workspace."""


def resolve_inside(workspace: Path, user_path: str) -> Path:
    """``user_path`` (relative to the workspace, or absolute) resolved with symlinks
    followed; refused when the result is not the workspace or below it."""
    root = Path(os.path.realpath(workspace))
    candidate = Path(user_path).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and root not in resolved.parents:
        raise OutsideWorkspaceError(f"{user_path!r} is outside the workspace")
    return resolved
