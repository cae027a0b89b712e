"""Who a key (or a web chat sign-in) acts for, and the conversations that person has here.

A person is named as ``chatgate api key create PERSON`` names them: a person of
``agent.identity_links`` (``alice``), or one account, ``platform:user_id``. They act with
their own rights: they may use the bot while one of their accounts may (the DM policy of its
platform, pairing included), they are an owner when one of their accounts is, and they count
against their own limits (``person:alice`` as their chats do, else ``telegram:42``).

Their conversations here are sessions of their own (``thread`` is the client's session) in
the workspace they already have: a linked person's (``alice``, the one their chats share
with ``dm_scope: linked``), else the account's own DM workspace (``telegram-42``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.conversation import ChannelInfo, Conversation
from bot.messages import ChatType, InboundMessage
from bot.session_keys import SessionKey


@dataclass(frozen=True, slots=True)
class Person:
    name: str  # as the key names them: "alice" or "telegram:42"
    linked: str | None  # their person of identity_links
    accounts: tuple[tuple[str, str], ...]  # (platform, user id) of every account of theirs

    @property
    def limit_key(self) -> str:
        """What ``bot.limits`` counts them as (their chats count the same)."""
        if self.linked is not None:
            return f"person:{self.linked}"
        platform, user = self.accounts[0]
        return f"{platform}:{user}"

    def conversation(self, agent: str, platform: str, thread: str, channel: ChannelInfo) -> Conversation:
        """Their session ``thread`` on ``platform`` (``api``, ``webchat``), in their workspace."""
        if self.linked is not None:
            key = SessionKey(agent, ChatType.DM, self.linked, None, thread)
        else:
            account_platform, user = self.accounts[0]
            key = SessionKey(agent, ChatType.DM, user, account_platform, thread)
        return Conversation(key, platform, platform, thread, ChatType.DM, None, self.linked, channel)


@dataclass(frozen=True, slots=True)
class Directory:
    """Who the senders of the API's or the web chat's channel are (their ``OfPeople``): a sender
    id is a person's name; their message belongs to their session ``chat``."""

    agent: str
    links: Mapping[str, Sequence[str]]
    info: ChannelInfo
    owner: Callable[[Person], bool]  # one of their accounts is an owner

    def person(self, user_id: str) -> Person | None:
        return person_named(user_id, self.links)

    def conversation_of(self, platform: str, msg: InboundMessage) -> Conversation | None:
        person = self.person(msg.sender.id)
        return None if person is None else person.conversation(self.agent, platform, msg.chat_id, self.info)

    def is_owner(self, user_id: str) -> bool:
        person = self.person(user_id)
        return person is not None and self.owner(person)


def person_named(name: str, identity_links: Mapping[str, Sequence[str]]) -> Person | None:
    """The person ``name`` is (a linked person, or ``platform:user_id``); None when it is neither."""
    name = name.strip()
    if name in identity_links:
        accounts = tuple(_split(a) for a in identity_links[name])
        return Person(name, name, accounts)
    platform, sep, user = name.partition(":")
    if not sep or not user or not platform.isalpha() or not platform.islower():
        return None
    linked = next((p for p, accounts in identity_links.items() if name in accounts), None)
    if linked is not None:
        return Person(name, linked, tuple(_split(a) for a in identity_links[linked]))
    return Person(name, None, ((platform, user),))


def _split(account: str) -> tuple[str, str]:
    platform, _, user = account.partition(":")
    return platform, user


PERSON_HELP = "a person of agent.identity_links (alice), or platform:user_id (telegram:123456)"
