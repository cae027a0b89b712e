"""``skills:`` in the config: where the shared skills are, whether each workspace's own count, and
how many the prompt lists. The shared folders default to ``skills/`` in the data directory and are
never inside ``workspace.root`` (``SkillsConfig.check``, once the whole file is read)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field

from bot.config.types import CapabilitySection, Int, Section
from bot.errors import ConfigError


class SkillsConfig(CapabilitySection):
    """Agent Skills (``bot.skills``): folders with a SKILL.md, listed in the prompt, read with read_skill."""

    model_config = ConfigDict(json_schema_extra={"description": "Agent Skills: folders with a SKILL.md (name, "
        "description, then instructions) that the model loads when a task fits; see docs/guide/mcp-and-skills.md"})

    paths: tuple[Path, ...] | None = Field(default=None, description="the owner's shared skill folders, e.g. "
        "[/srv/chatgate/skills]; null: skills/ in the data directory (beside storage.path's database, data/skills). "
        "Never inside workspace.root: no chat can change them. Read at start, checked for changes once a second")
    in_workspaces: bool = Field(default=True, description="also each workspace's own skills/ (checked on every run; "
        "in a group only an owner may change it); one of the same name as a shared skill is used instead of it, in "
        "that workspace only")
    inline_max: Annotated[Int, Field(ge=0, le=100)] = Field(default=15, description="the prompt lists up to this "
        "many skills by name and description; with more, the model finds them with the skill_search tool")

    def folders(self, storage_path: Path) -> tuple[Path, ...]:
        """The shared skill folders: ``paths``, else ``skills/`` in the data directory (the folder
        of ``storage.path``)."""
        if self.paths is not None:
            return self.paths
        return (storage_path.parent / "skills",)

    def check(self, config: Section) -> None:
        from bot.config.schema import CoreConfig

        assert isinstance(config, CoreConfig)
        root = Path(os.path.realpath(config.workspace.root))  # a link into a workspace is inside it
        for i, folder in enumerate(self.folders(config.storage.path)):
            if root in Path(os.path.realpath(folder)).parents or Path(os.path.realpath(folder)) == root:
                key = f"skills.paths[{i}]" if self.paths is not None else "skills.paths"
                raise ConfigError(key, f"{folder} is inside workspace.root, where the bot's file tools could change "
                                       "shared skills; put them elsewhere (a workspace's own go in its skills/)")
