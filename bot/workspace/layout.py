"""The layout of a workspace: its folder's name under the root, the files the prompt shows,
and which of them a group's members may not change.

One directory per workspace, directly under the root, named from the session key
(``bot.conversation.workspace_name``, which has the table): the parts are joined by
``safe_name``, which keeps readable ids as they are and hashes the rest; see there.

In a group workspace every file the group's prompt shows (``GROUP_PROTECTED``, derived from
``GROUP_CONTEXT_FILES``), and everything in its ``skills/`` folder (instructions the bot follows,
``GROUP_PROTECTED_FOLDERS``), is read-only to the model unless the sender is an owner:
``read_only_for`` says so for a located path. BOOTSTRAP.md is neither seeded nor loaded in a
group: a first-run ritual is for one person's own assistant, not for a room.
"""

from __future__ import annotations

import hashlib
import re

from bot.messages import ChatType

BOOTSTRAP_FILE = "BOOTSTRAP.md"
MEMORY_FILE = "MEMORY.md"
CONTEXT_FILES: tuple[str, ...] = (
    "AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", BOOTSTRAP_FILE, MEMORY_FILE,
)
# What a group's prompt shows: no MEMORY.md (private notes), no BOOTSTRAP.md (see above).
GROUP_CONTEXT_FILES = tuple(name for name in CONTEXT_FILES if name not in (MEMORY_FILE, BOOTSTRAP_FILE))
# Read-only to non-owners in a group: every file its prompt shows, and BOOTSTRAP.md, which
# no group loads but whose name says "follow me" to any prompt that ever would.
GROUP_PROTECTED = (*GROUP_CONTEXT_FILES, BOOTSTRAP_FILE)
SKILLS_FOLDER = "skills"  # a workspace's own Agent Skills (bot.skills)
GROUP_PROTECTED_FOLDERS = (SKILLS_FOLDER,)  # read-only to non-owners in a group, with all they hold
GROUP_UNSEEDED = frozenset({BOOTSTRAP_FILE})


def read_only_for(relative: str, *, chat_type: str, sender_is_owner: bool) -> bool:
    """True when the model may not write ``relative`` for this sender: a persona or rule
    file at the top of a group workspace, or anything in its ``skills/`` folder (the folder
    itself included), and the sender is not an owner."""
    if sender_is_owner or chat_type != ChatType.GROUP.value:
        return False
    folded = relative.casefold()
    if folded.split("/", 1)[0] in {name.casefold() for name in GROUP_PROTECTED_FOLDERS}:
        return True
    return folded in {name.casefold() for name in GROUP_PROTECTED}


MAX_NAME_LEN = 100  # well under NAME_MAX (255 bytes, ``fence``) on every filesystem we care about
_HASH_LEN = 12  # hex digits of sha256: 48 bits
UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_HASHED_TAIL = re.compile(rf"-[0-9a-f]{{{_HASH_LEN}}}$")


def safe_name(*parts: str) -> str:
    """``parts`` joined with ``-`` into one directory name made of ``[A-Za-z0-9._-]``.

    A name stays readable as is (``telegram-group--100123``) when every character is
    safe, no part is empty, a part has a ``-`` only as its first character (Telegram's
    negative chat ids), the name starts with neither ``.`` nor ``-``, it is at most
    ``MAX_NAME_LEN`` long and it does not end like a hashed name. Otherwise unsafe
    characters become ``_``, the name is cut, and ``-`` plus 12 hex digits of a hash of
    the original parts is appended: ``a/b`` gives ``a_b-1c2d...`` while ``a_b`` stays.

    So two different part tuples never share a name: kept names parse back uniquely
    (hyphens inside a part force the hash) and never end like a hashed one, and hashed
    names differ unless 48-bit hashes collide. The result is never ``.``, ``..``, hidden,
    or empty.
    """
    if not parts:
        raise ValueError("safe_name needs at least one part")
    joined = "-".join(parts)
    if (
        all(part and "-" not in part[1:] for part in parts)
        and not UNSAFE_CHARS.search(joined)
        and joined[0] not in ".-"
        and len(joined) <= MAX_NAME_LEN
        and not _HASHED_TAIL.search(joined)
    ):
        return joined
    raw = "\x00".join(parts).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(raw).hexdigest()[:_HASH_LEN]
    readable = UNSAFE_CHARS.sub("_", joined)[: MAX_NAME_LEN - _HASH_LEN - 1]
    if readable[:1] in ("", ".", "-"):
        readable = "_" + readable[1:]
    return f"{readable}-{digest}"
