"""Who may use a server (``grant``), pure.

``grant`` is ``owners`` (the default), ``everyone``, or a list of entries: ``owners``, a
person ``platform:user_id``, a group chat ``platform:chat_id``, or a linked person
``person:name`` (``agent.identity_links``). A run may use a server when:

- the grant is ``everyone``;
- ``owners`` is granted and every message of the run comes from an owner;
- the run is in a group chat that is granted (every member of a granted group may use it);
- or every person the run serves is granted (a run may serve several: the senders of a
  batch collected while busy), where a person granted on one platform is granted on every
  platform ``identity_links`` joins to them, as ``limits`` counts them as one person.

The people a run serves are its payers (``platform:user_id``, or ``person:name`` for a
linked one, as ``bot.limits.limit_keys`` names them), else the one it acts for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.messages import ChatType
from bot.session_keys import person_of
from bot.tools.base import ToolContext


@dataclass(frozen=True, slots=True)
class Asker:
    """Whom a run serves, as grants see it."""

    platform: str
    chat_id: str
    group: bool
    owner: bool
    people: tuple[str, ...]  # "platform:user_id" or "person:name"

    @classmethod
    def of(cls, ctx: ToolContext) -> Asker:
        people = ctx.payers or ((f"{ctx.platform}:{ctx.user_id}",) if ctx.user_id else ())
        return cls(ctx.platform, ctx.conversation.chat_id, ctx.chat_type is ChatType.GROUP, ctx.sender_is_owner,
                   tuple(people))


def identities(who: str, links: Mapping[str, Sequence[str]]) -> set[str]:
    """Every name one person goes by: ``person:name`` and each linked ``platform:user_id``."""
    if who.startswith("person:"):
        name = who.removeprefix("person:")
        return {who, *links.get(name, ())}
    platform, _, user = who.partition(":")
    person = person_of(platform, user, links)
    return {who} if person is None else {who, f"person:{person}", *links.get(person, ())}


def may_use(grant: Sequence[str], asker: Asker, links: Mapping[str, Sequence[str]] | None = None) -> bool:
    entries = tuple(grant)
    if "everyone" in entries:
        return True
    if "owners" in entries and asker.owner:
        return True
    if asker.group and f"{asker.platform}:{asker.chat_id}" in entries:
        return True
    granted = set(entries)
    return bool(asker.people) and all(identities(p, links or {}) & granted for p in asker.people)
