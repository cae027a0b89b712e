"""Agent Skills: folders of instructions the model loads when a task fits (issue 21).

    skills = open_skills([data_dir / "skills"], in_workspaces=True, guard=GuardMode.WARN)
    Agent(..., toolsets=[skills])          # the "## Skills" section, read_skill, skill_search

Where skills come from: the owner's shared folders (``skills.paths``; by default ``skills/``
beside the database) and, with ``in_workspaces``, each workspace's own ``skills/``. In a
workspace, its own skill wins over a shared one of the same name (for that workspace only,
and the prompt says so). Shared folders lie outside every workspace, so no tool can change
them; a group's ``skills/`` is read-only to its members (``bot.workspace.read_only_for``).

Modules: ``format`` (the SKILL.md format, pure), ``catalog`` (the nouns; merge and search,
pure), ``scan`` (reading a folder, its stamp), ``watch`` (catalogs kept current cheaply),
``prompt`` (the section, pure), ``reading`` (a skill's files, confined), ``toolset`` (the
offer and the tools), ``report`` (``chatgate check``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.agent.guard import GuardMode
from bot.skills.catalog import Catalog, Origin, Problem, Skill
from bot.skills.format import SkillFormatError, SkillInfo, parse_skill
from bot.skills.report import check_lines
from bot.skills.toolset import INLINE_MAX, Skills
from bot.skills.watch import SharedSkills, WorkspaceSkills

__all__ = ["Catalog", "Origin", "Problem", "Skill", "SkillFormatError", "SkillInfo", "Skills", "SharedSkills",
           "WorkspaceSkills", "check_lines", "open_skills", "parse_skill"]


def open_skills(folders: Sequence[Path], *, in_workspaces: bool = True, guard: GuardMode = GuardMode.WARN,
                inline_max: int = INLINE_MAX) -> Skills:
    """The skills toolset; the shared ``folders`` are scanned now (blocking, quick: front matter only)."""
    return Skills(SharedSkills(folders, guard), WorkspaceSkills(guard) if in_workspaces else None,
                  guard=guard, inline_max=inline_max)
