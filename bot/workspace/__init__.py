"""Per-user workspaces: where a session's files live, and the fence around them.

One idea per module:

- ``fence``: every path walked inside the workspace with ``O_NOFOLLOW`` (``locate``,
  ``open_inside``, ``create_inside``, ``read_inside``...), so no link ever leads out.
- ``layout``: the workspace's folder name (``safe_name``), the files the prompt shows and
  what a group's members may not change (``read_only_for``).
- ``seeding``: ``Workspaces`` finds a conversation's workspace and seeds it from the templates.
- ``context``: the context files the system prompt loads, capped and cached.
- ``uploads``: files people send, saved in ``inbox/``.

Every name is here too: ``from bot.workspace import locate`` works as it always did.
"""

from __future__ import annotations

from bot.workspace.context import PER_FILE_CAP, TOTAL_CAP, ContextFile, load_context_files, truncation_marker
from bot.workspace.fence import (
    DIR_FLAGS,
    MAX_LINKS,
    NAME_MAX,
    PATH_MAX,
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
    GROUP_UNSEEDED,
    MAX_NAME_LEN,
    MEMORY_FILE,
    SKILLS_FOLDER,
    read_only_for,
    safe_name,
)
from bot.workspace.seeding import SEEDED_MARKER, Place, Workspaces, seed_workspace
from bot.workspace.uploads import INBOX, save_upload

__all__ = [
    "BOOTSTRAP_FILE", "CONTEXT_FILES", "DIR_FLAGS", "GROUP_CONTEXT_FILES", "GROUP_PROTECTED",
    "GROUP_PROTECTED_FOLDERS", "GROUP_UNSEEDED", "INBOX", "MAX_LINKS", "MAX_NAME_LEN", "MEMORY_FILE", "NAME_MAX",
    "PATH_MAX", "PER_FILE_CAP", "SEEDED_MARKER", "SKILLS_FOLDER", "TOTAL_CAP", "ContextFile", "Located",
    "OutsideWorkspaceError", "PathTooLongError", "Place", "Workspaces", "create_inside", "load_context_files",
    "locate", "open_folder_inside", "open_inside", "read_inside", "read_only_for", "resolve_inside",
    "safe_name", "save_upload", "seed_workspace", "truncation_marker",
]
