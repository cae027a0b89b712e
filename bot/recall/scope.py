"""Which stored conversations a run may search: decided from its conversation alone, pure.

| the run's conversation            | what it may see                                              |
| DM (per-user or linked)           | the person's DMs on every linked platform: the linked DM key, |
|                                   | each linked account's DM key and its DM threads               |
| DM of a person with no link       | that account's DM key and its threads                         |
| group / channel / thread          | that group's keys: the group and its threads, no member's own |
| a member's own (group_scope)      | that member's own session there, nothing else                 |
| sub-agent                         | what its parent sees (the chat's own conversation)            |

Sub-agents' own sessions are never searched (their text is the bot's, not a person's). Every
key is of the run's agent. ``Scope.tokens`` says it in the search index's words: each stored
message carries its session's ``scope_token`` (bot.recall.schema), and a search names the
tokens of its scope in the full-text query itself, so words and scope meet before ranking.
``Scope.where`` says it in SQL over session keys (``chatgate people forget``, and a second check
of the few messages found); the table tests hold the three together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.conversation import Conversation
from bot.messages import ChatType
from bot.session_keys import SessionKey, format_key, parse_key


@dataclass(frozen=True, slots=True)
class Scope:
    """Keys a run may see: ``keys`` exactly, and each of ``families`` with every key under it
    (``<family>:...``: threads); ``shared`` leaves out members' own sessions (``:user:``)."""

    keys: tuple[str, ...]
    families: tuple[str, ...] = ()
    shared: bool = False

    def where(self, column: str = "s.key", *, subs: bool = False) -> tuple[str, tuple[object, ...]]:
        """SQL true for the keys of this scope (sub-agents' sessions only with ``subs``), and its
        arguments. ``substr`` compares exactly (``LIKE`` would fold case and read ``%``/``_`` in ids)."""
        own = [f"{column} = ?" for _ in self.keys]
        args: list[object] = list(self.keys)
        for family in self.families:
            own.append(f"substr({column}, 1, ?) = ?")
            args += [len(family) + 1, family + ":"]
        if not own:
            return "1 = 0", ()
        sql = f"({' OR '.join(own)})" + ("" if subs else f" AND {column} NOT LIKE '%:sub:%'")
        if self.shared:
            sql += f" AND {column} NOT LIKE '%:user:%'"
        return sql, tuple(args)

    def tokens(self) -> tuple[str, ...]:
        """The scope tokens of exactly the keys this scope sees (``scope_token``): a family's own
        key (a DM, or a group's shared conversation: its threads share it) and each key that is
        not in a family (a member's own session). Raises ValueError for a scope the tokens cannot
        say exactly (a group's family without ``shared``: its members' sessions have tokens of
        their own)."""
        found = []
        for family in self.families:
            root = _parts(family)[0]
            if scope_token(family) != family or (len(root) == 5 and root[3] == "group" and not self.shared):
                raise ValueError(f"not a scope the index can say: {self}")
            found.append(family)
        for key in self.keys:
            if key in self.families:
                continue
            if scope_token(key) != key or "sub" in _parts(key)[1][::2]:
                raise ValueError(f"not a scope the index can say: {self}")
            found.append(key)
        return tuple(dict.fromkeys(found))

    def sees(self, key: str) -> bool:
        """What ``where`` says, in Python (the table tests hold the two together)."""
        if ":sub:" in key or (self.shared and ":user:" in key):
            return False
        return key in self.keys or any(key.startswith(family + ":") for family in self.families)


def scope_token(key: str) -> str:
    """The index's scope of a stored session key (the SQL of recall/0003 computes the same): the
    key without its thread for a DM or a group's shared conversation (its first 4 parts for a
    linked DM, 5 otherwise), else the whole key (a member's own session, a sub-agent's)."""
    root, rest = _parts(key)
    if len(rest) == 2 and rest[0] == "thread":
        return ":".join(root)
    return key


def _parts(key: str) -> tuple[list[str], list[str]]:
    """A key's first parts (4 for a linked DM, else 5) and the rest (labels and values)."""
    parts = key.split(":")
    n = 4 if len(parts) > 2 and parts[2] == "dm" else 5
    return parts[:n], parts[n:]


def scope_of(conversation: Conversation, identity_links: Mapping[str, Sequence[str]] | None = None) -> Scope:
    """What a run in ``conversation`` may search (a sub-agent: its parent's)."""
    key = replace(conversation.key, subs=())
    if key.kind is ChatType.GROUP:
        if key.member is not None:
            return Scope((format_key(key),))
        group = format_key(replace(key, thread=None))
        return Scope((group,), (group,), shared=True)
    person = conversation.person if conversation.person is not None else (key.peer if key.platform is None else None)
    accounts: list[tuple[str, str]] = []
    if person is not None:
        for account in (identity_links or {}).get(person, ()):
            platform, _, user_id = account.partition(":")
            if platform and user_id:
                accounts.append((platform, user_id))
    if key.platform is not None and (key.platform, key.peer) not in accounts:
        accounts.append((key.platform, key.peer))
    families = tuple(format_key(SessionKey(key.agent, ChatType.DM, user_id, platform))
                     for platform, user_id in accounts)
    linked = (format_key(SessionKey(key.agent, ChatType.DM, person)),) if person is not None else ()
    return Scope((*linked, *families), (*linked, *families))


def platform_of(key: str) -> str:
    """The platform a stored session key is on ("" for a linked DM: every linked platform)."""
    try:
        return parse_key(key).platform or ""
    except ValueError:
        return ""
