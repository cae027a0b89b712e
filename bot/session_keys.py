"""The one place session keys are built and parsed.

| context                         | key                                         |
| DM (dm_scope: per-user)         | agent:{agent}:{platform}:dm:{user_id}       |
| DM (dm_scope: linked, a person) | agent:{agent}:dm:{person}                   |
| group / channel                 | agent:{agent}:{platform}:group:{chat_id}    |
| thread or forum topic           | group key + :thread:{thread_id}             |
| DM thread (Slack assistant)     | DM key (per-user) + :thread:{thread_id}     |
| a member (group_scope: per-user)| group (or thread) key + :user:{user_id}     |
| sub-agent                       | parent key + :sub:{n}                       |

Every id is escaped (``%`` -> ``%25``, ``:`` -> ``%3A``) so no part contains ``:``, and
``parse`` is the exact inverse of ``format``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.messages import ChatType, InboundMessage

DmScope = Literal["per-user", "linked"]
GroupScope = Literal["per-group", "per-user"]


@dataclass(frozen=True, slots=True)
class SessionKey:
    agent: str
    kind: ChatType
    peer: str  # user id (DM), person (linked DM) or chat id (group)
    platform: str | None = None  # None only for a linked DM
    thread: str | None = None
    subs: tuple[int, ...] = ()
    member: str | None = None  # a group member's own session (group_scope: per-user)

    def __str__(self) -> str:
        return format_key(self)

    def sub(self, n: int) -> SessionKey:
        """The key of this session's n-th sub-agent."""
        return SessionKey(self.agent, self.kind, self.peer, self.platform, self.thread, (*self.subs, n), self.member)


def escape(part: str) -> str:
    if not part:
        raise ValueError("session key parts must not be empty")
    return part.replace("%", "%25").replace(":", "%3A")


def unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%3a", ":").replace("%25", "%")


def format_key(key: SessionKey) -> str:
    parts = ["agent", escape(key.agent)]
    if key.platform is not None:
        parts.append(escape(key.platform))
    elif key.kind is not ChatType.DM:
        raise ValueError("only a linked DM key has no platform")
    parts += [key.kind.value, escape(key.peer)]
    if key.thread is not None:
        parts += ["thread", escape(key.thread)]
    if key.member is not None:
        parts += ["user", escape(key.member)]
    for n in key.subs:
        parts += ["sub", str(n)]
    return ":".join(parts)


def parse_key(raw: str) -> SessionKey:
    """Inverse of ``format_key``; raises ValueError on anything it did not build."""
    parts = raw.split(":")
    if len(parts) < 4 or parts[0] != "agent":
        raise ValueError(f"not a session key: {raw!r}")
    agent = unescape(parts[1])
    if parts[2] == "dm":  # linked DM: agent:{agent}:dm:{person}
        platform, kind, peer, rest = None, ChatType.DM, parts[3], parts[4:]
    else:
        if len(parts) < 5 or parts[3] not in ("dm", "group"):
            raise ValueError(f"not a session key: {raw!r}")
        platform, kind, peer, rest = unescape(parts[2]), ChatType(parts[3]), parts[4], parts[5:]
    thread: str | None = None
    member: str | None = None
    subs: list[int] = []
    while rest:
        if len(rest) < 2:
            raise ValueError(f"not a session key: {raw!r}")
        label, value, rest = rest[0], rest[1], rest[2:]
        if label == "thread" and thread is None and member is None and not subs:
            thread = unescape(value)
        elif label == "user" and member is None and kind is ChatType.GROUP and not subs:
            member = unescape(value)
        elif label == "sub" and value.isdigit():
            subs.append(int(value))
        else:
            raise ValueError(f"not a session key: {raw!r}")
    if not peer:
        raise ValueError(f"not a session key: {raw!r}")
    return SessionKey(agent, kind, unescape(peer), platform, thread, tuple(subs), member)


def person_of(platform: str, user_id: str, identity_links: Mapping[str, Sequence[str]] | None) -> str | None:
    """The linked identity that ``identity_links`` gives ``platform:user_id``, if any."""
    account = f"{platform}:{user_id}"
    for person, accounts in (identity_links or {}).items():
        if account in accounts:
            return person
    return None


def key_for(msg: InboundMessage, agent: str, *, dm_scope: DmScope = "per-user",
            identity_links: Mapping[str, Sequence[str]] | None = None,
            group_scope: GroupScope = "per-group") -> SessionKey:
    """The session an inbound message belongs to.

    ``identity_links`` maps a person to the ``platform:user_id`` accounts that are theirs;
    with ``dm_scope: linked`` their DMs on every linked platform share one session. With
    ``group_scope: per-user`` each member of a group has a session of their own there (as
    they have a workspace of their own), so nothing one member asked reaches another.
    """
    if msg.chat_type is ChatType.DM:
        person = person_of(msg.platform, msg.sender.id, identity_links) if dm_scope == "linked" else None
        if person is not None:
            return SessionKey(agent, ChatType.DM, person)
        # a DM thread (Slack's assistant threads: each "new chat" is one) is a conversation of its own
        return SessionKey(agent, ChatType.DM, msg.sender.id, msg.platform, msg.thread_id)
    member = msg.sender.id if group_scope == "per-user" else None
    return SessionKey(agent, ChatType.GROUP, msg.chat_id, msg.platform, msg.thread_id, member=member)
