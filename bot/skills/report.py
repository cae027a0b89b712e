"""What ``chatgate check`` says of the skills: each folder, the skills found, and why others
were skipped. It scans as a run would (the same rules, links and all)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bot.agent.guard import GuardMode
from bot.skills.catalog import Catalog, Problem
from bot.skills.scan import shared_folder, workspace_folder
from bot.workspace import SKILLS_FOLDER

_INDENT = " " * 11


def check_lines(shared: Sequence[Path], workspace_root: Path | None, guard: GuardMode = GuardMode.WARN) -> list[str]:
    """Lines for ``chatgate check``: the shared folders first, then every workspace's ``skills/``
    (``workspace_root`` None: workspaces' own skills are off)."""
    lines: list[str] = []
    problems: list[Problem] = []
    flagged: list[str] = []
    for folder in shared:
        catalog = shared_folder(folder, guard).catalog
        lines.append(_folder_line(f"shared {folder}", catalog, missing=not folder.is_dir()))
        problems += catalog.problems
        flagged += _flagged(catalog)
    if workspace_root is not None:
        spaces = 0
        for workspace in _workspaces(workspace_root):
            catalog = workspace_folder(workspace, guard).catalog
            if catalog:
                spaces += 1
                lines.append(_folder_line(f"workspace {workspace / SKILLS_FOLDER}", catalog, missing=False))
                problems += catalog.problems
                flagged += _flagged(catalog)
        if not spaces:
            lines.append(f"no workspace has skills of its own yet ({SKILLS_FOLDER}/ in a workspace)")
    else:
        lines.append("workspaces' own skills are off (skills.in_workspaces: false)")
    lines += [f"skipped {p.path}: {p.why}" for p in problems]
    lines += flagged
    return [("skills     " if i == 0 else _INDENT) + line for i, line in enumerate(lines)]


def _folder_line(label: str, catalog: Catalog, *, missing: bool) -> str:
    if missing:
        return f"{label}: not there (no shared skills)"
    names = ", ".join(s.name for s in catalog.skills) or "none"
    count = len(catalog.skills)
    return f"{label}: {count} skill{'s' if count != 1 else ''} ({names})"


def _flagged(catalog: Catalog) -> list[str]:
    return [f"flagged {s.source}: its description looks like prompt injection ({', '.join(s.flagged)})"
            for s in catalog.skills if s.flagged]


def _workspaces(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as listing:
            return sorted(Path(e.path) for e in listing if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
