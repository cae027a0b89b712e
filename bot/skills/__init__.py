"""Agent Skills: folders of instructions the model loads when a task fits (issue 21).

    skills = open_skills([data_dir / "skills"], in_workspaces=True, guard=GuardMode.WARN)
    Agent(..., toolsets=[skills])          # the "## Skills" section, read_skill, skill_search

The skills capability (``capability``) offers that toolset to every run, and ``chatgate check``
lists what it finds.

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

import importlib
from typing import Any

_LAZY = {"Catalog": "catalog", "Origin": "catalog", "Problem": "catalog", "Skill": "catalog",
         "SkillFormatError": "format", "SkillInfo": "format", "parse_skill": "format", "check_lines": "report",
         "INLINE_MAX": "toolset", "Skills": "toolset", "SharedSkills": "watch", "WorkspaceSkills": "watch",
         "open_skills": "capability"}

__all__ = ["Catalog", "Origin", "Problem", "Skill", "SkillFormatError", "SkillInfo", "Skills", "SharedSkills",
           "WorkspaceSkills", "check_lines", "open_skills", "parse_skill"]


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use (PEP 562): the capability's spec loads none of them."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"bot.skills.{module}"), name)
