"""Per-user workspaces: where a session's files live, and the fence around them.

One idea per module:

- ``fence``: every path walked inside the workspace with ``O_NOFOLLOW`` (``locate``,
  ``open_inside``, ``create_inside``, ``read_inside``...), so no link ever leads out.
- ``layout``: the workspace's folder name (``safe_name``), the files the prompt shows and
  what a group's members may not change (``read_only_for``).
- ``seeding``: ``Workspaces`` finds a conversation's workspace and seeds it from the templates.
- ``context``: the context files the system prompt loads, capped and cached.
- ``uploads``: files people send, saved in ``inbox/``.

What the rest of the bot uses is re-exported here.
"""

from __future__ import annotations

from bot.workspace.context import ContextFile, load_context_files, truncation_marker
from bot.workspace.fence import (
    Located,
    OutsideWorkspaceError,
    PathTooLongError,
    create_inside,
    locate,
    open_folder_inside,
    open_inside,
    read_inside,
    resolve_inside,
)
from bot.workspace.layout import (
    BOOTSTRAP_FILE,
    CONTEXT_FILES,
    GROUP_CONTEXT_FILES,
    GROUP_PROTECTED,
    GROUP_PROTECTED_FOLDERS,
    MAX_NAME_LEN,
    MEMORY_FILE,
    SKILLS_FOLDER,
    read_only_for,
    safe_name,
)
from bot.workspace.seeding import SEEDED_MARKER, Workspaces, seed_workspace
from bot.workspace.uploads import save_upload

__all__ = [
    "BOOTSTRAP_FILE", "CONTEXT_FILES", "GROUP_CONTEXT_FILES", "GROUP_PROTECTED", "GROUP_PROTECTED_FOLDERS",
    "MAX_NAME_LEN", "MEMORY_FILE", "SEEDED_MARKER", "SKILLS_FOLDER", "ContextFile", "Located", "OutsideWorkspaceError",
    "PathTooLongError", "Workspaces", "create_inside", "load_context_files", "locate", "open_folder_inside",
    "open_inside", "read_inside", "read_only_for", "resolve_inside", "safe_name", "save_upload", "seed_workspace",
    "truncation_marker",
]
