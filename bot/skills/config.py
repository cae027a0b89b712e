"""``skills:``, the config section of Agent Skills (composed into the config by ``bot.config.schema``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from bot.config.types import Int, Section


class SkillsConfig(Section):
    """Agent Skills (``bot.skills``): folders with a SKILL.md, listed in the prompt, read with read_skill."""

    paths: tuple[Path, ...] | None = None  # shared skill folders; None: skills/ in the data directory
    in_workspaces: bool = True  # also each workspace's own skills/ (in a group, only owners change it)
    inline_max: Annotated[Int, Field(ge=0, le=100)] = 15  # listed in the prompt up to this many; more: skill_search
