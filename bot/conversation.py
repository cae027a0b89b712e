"""The Conversation: who a turn is for and where it happens, decided once.

A ``Conversation`` is built where a turn enters the core (``conversation_for``, for an
inbound message) and carried as it is from there on: by the workspaces, the run request,
the tool context, the run events and the prompt. It holds the typed session key, the linked
person (if any), the chat and what the channel shows of itself (``ChannelInfo``).

The scope is decided by the session key (``bot.session_keys.key_for``); the workspace
follows from the key (``workspace_name``), so a linked person's DMs on every platform share
one workspace as they share one session, and a sub-agent (``sub``) works in its parent's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bot.messages import ChatType, InboundMessage, Purpose, Target
from bot.session_keys import DmScope, GroupScope, SessionKey, key_for, parse_key, person_of
from bot.workspace import safe_name


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """What a channel shows of itself to the core: its name, its name in prose and how to
    format answers there (for the prompt)."""

    name: str
    display: str = ""
    hints: str = ""

    @property
    def shown(self) -> str:
        return self.display or self.name


@dataclass(frozen=True, slots=True)
class Conversation:
    key: SessionKey
    platform: str
    account: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None = None
    person: str | None = None  # the linked identity (``identity_links``) of the one it serves, if any
    channel: ChannelInfo = field(default_factory=lambda: ChannelInfo(""))

    @property
    def session_key(self) -> str:
        """The key as text, for logs and the store's edge."""
        return str(self.key)

    @property
    def workspace(self) -> str:
        """The workspace's folder name under ``workspace.root`` (see ``workspace_name``)."""
        return workspace_name(self.key)

    @property
    def is_group(self) -> bool:
        return self.chat_type is ChatType.GROUP

    @property
    def target(self) -> Target:
        """Where a message the bot starts in the conversation goes (a task's: no message asked): its chat, thread."""
        return Target(self.chat_id, self.chat_type, self.thread_id, purpose=Purpose.TASK)

    @classmethod
    def of_key(cls, key: str | SessionKey, *, account: str = "", channel: ChannelInfo | None = None) -> Conversation:
        """The conversation of a session key alone, its chat taken from the key (a DM's chat is
        its user's; a linked DM's platform is ``""``): for tools run by hand, tests, bench."""
        key = parse_key(key) if isinstance(key, str) else key
        platform = key.platform or ""
        return cls(key, platform, account, key.peer, key.kind, key.thread,
                   key.peer if key.platform is None else None, channel or ChannelInfo(platform))

    @property
    def root(self) -> Conversation:
        """The chat's own conversation: a sub-agent's parent (at any depth), else itself."""
        return replace(self, key=replace(self.key, subs=())) if self.key.subs else self

    def sub(self, n: int) -> Conversation:
        """The n-th sub-agent's conversation: a session of its own, the parent's workspace."""
        return replace(self, key=self.key.sub(n))


def workspace_name(key: SessionKey) -> str:
    """The folder of a session's workspace, from its key alone.

    | session                               | folder                                      |
    | DM (and its threads)                  | {platform}-{user_id}                        |
    | DM of a linked person (dm_scope)      | {person}                                    |
    | group / channel, threads included     | {platform}-group-{chat_id}                  |
    | group member (group_scope: per-user)  | {platform}-group-{chat_id}-user-{user_id}   |

    Sub-agents share their parent's. ``safe_name`` keeps readable ids and hashes the rest.
    """
    if key.kind is ChatType.DM:
        return safe_name(key.peer) if key.platform is None else safe_name(key.platform, key.peer)
    assert key.platform is not None  # only a linked DM has none
    if key.member is not None:
        return safe_name(key.platform, "group", key.peer, "user", key.member)
    return safe_name(key.platform, "group", key.peer)


def conversation_for(msg: InboundMessage, agent: str, *, dm_scope: DmScope = "per-user",
                     identity_links: Mapping[str, Sequence[str]] | None = None,
                     group_scope: GroupScope = "per-group", channel: ChannelInfo | None = None) -> Conversation:
    """The conversation an inbound message belongs to."""
    key = key_for(msg, agent, dm_scope=dm_scope, identity_links=identity_links, group_scope=group_scope)
    return Conversation(key, msg.platform, msg.account, msg.chat_id, msg.chat_type, msg.thread_id,
                        person_of(msg.platform, msg.sender.id, identity_links),
                        channel or ChannelInfo(msg.platform))
