"""The skills capability (``skills:``, its section ``SkillsConfig``): the toolset of the shared
folders' and the workspaces' skills, offered to every run (before the MCP servers'), and
``chatgate check``'s list of what it found. Always on: with no skill anywhere it offers nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.skills.config import SkillsConfig

if TYPE_CHECKING:
    from bot.agent.guard import GuardMode
    from bot.config.schema import CoreConfig
    from bot.skills.toolset import Skills


def open_skills(folders: Sequence[Path], *, in_workspaces: bool = True, guard: GuardMode | None = None,
                inline_max: int | None = None) -> Skills:
    """The skills toolset; the shared ``folders`` are scanned now (blocking, quick: front matter only)."""
    from bot.agent.guard import GuardMode
    from bot.skills.toolset import INLINE_MAX, Skills
    from bot.skills.watch import SharedSkills, WorkspaceSkills

    guard = GuardMode.WARN if guard is None else guard
    return Skills(SharedSkills(folders, guard), WorkspaceSkills(guard) if in_workspaces else None,
                  guard=guard, inline_max=INLINE_MAX if inline_max is None else inline_max)


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[Skills]:
    from bot.agent.guard import GuardMode

    cfg = core.config
    own = cfg.section("skills", SkillsConfig)
    skills = open_skills(own.folders(cfg.storage.path), in_workspaces=own.in_workspaces,
                         guard=GuardMode(cfg.agent.input_guard), inline_max=own.inline_max)
    core.toolsets.append(skills)  # offered to every run from now on (none runs before the channels start)
    yield skills


async def _found(config: CoreConfig) -> list[str]:
    from bot.agent.guard import GuardMode
    from bot.skills.report import check_lines

    own = config.section("skills", SkillsConfig)
    return check_lines(own.folders(config.storage.path), config.workspace.root if own.in_workspaces else None,
                       GuardMode(config.agent.input_guard))


SPEC = CapabilitySpec("skills", _open, config=SkillsConfig, probe=_found)
