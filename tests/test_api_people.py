"""The API's and the web chat's channels without a server: what a page that comes back is given
(``ExchangeChannel.since``), a question as the API's client reads it, who their senders are
(``OfPeople``: their sessions, owners only when one of their accounts is, and their own limits)."""

from __future__ import annotations

import pytest

from bot.access import Access
from bot.api.channel import ExchangeChannel, Item
from bot.api.people import Directory, person_named
from bot.api.webchat.channel import WebChannel
from bot.channels import Choice, OfPeople
from bot.config import AccessConfig
from bot.conversation import ChannelInfo
from bot.limits import limit_keys
from bot.messages import ChatType, InboundMessage, Sender, Target

LINKS = {"alice": ["telegram:42"], "bob": ["telegram:43"]}


def told(channel: ExchangeChannel, *chats: str) -> list[int]:
    for chat in chats:
        channel.tell(chat, Item("delta", chat))
    return [channel.last]


def test_a_page_that_comes_back_gets_what_it_missed_once_or_loads_again() -> None:
    channel = ExchangeChannel("webchat", keep=3)
    assert channel.since("w1", 0) == []  # nothing told: nothing missed
    told(channel, "w1", "w2", "w1")
    assert [i.id for i in channel.since("w1", 0) or []] == [1, 3]
    assert [i.id for i in channel.since("w1", 1) or []] == [3]
    assert channel.since("w1", 3) == []
    told(channel, "w1", "w1", "w1")  # 4, 5, 6: w1 keeps 4..6, 3 and 1 are dropped
    assert channel.since("w1", 1) is None  # some of it is gone: load the page again
    assert [i.id for i in channel.since("w1", 3) or []] == [4, 5, 6]
    assert channel.since("w9", 6) == []  # a chat never told anything, nothing forgotten since


def test_a_chat_no_longer_kept_at_all_means_loading_again() -> None:
    channel = ExchangeChannel("webchat", keep=2)
    for n in range(70):  # more chats than are kept: the first ones are dropped whole
        channel.tell(f"w{n}", Item("delta"))
    assert channel.since("w0", 0) is None
    assert channel.since("w0", channel.last) == []
    assert [i.id for i in channel.since("w69", 69) or []] == [70]


def test_the_api_keeps_nothing_for_later() -> None:
    channel = ExchangeChannel("api")
    channel.tell("t1", Item("delta", "x"))
    assert channel.since("t1", 0) == []


async def test_an_api_question_says_how_to_answer_it_and_is_heard_by_listeners() -> None:
    channel = ExchangeChannel("api")
    heard: list[tuple[str, str, str]] = []
    channel.listeners.append(lambda kind, q, note: heard.append((kind, q.person, note or q.text)))
    watch = channel.watch("t1")
    watch.who = "alice"
    choices = [Choice("ap:abc123:o", "Allow once"), Choice("ap:abc123:s", "Allow for this session"),
               Choice("ap:abc123:d", "Deny")]
    ref = await channel.ask(Target("t1", ChatType.DM), "Approval needed", choices)
    item = watch.items.get_nowait()
    assert item.kind == "ask" and item.text == ("Approval needed\nAnswer in the web chat, or from a DM of yours: "
                                                "/approve abc123 (once), /approve abc123 session or /deny abc123.")
    assert channel.questions[ref].approval == "abc123"
    press = InboundMessage("api", "api", "t1", ChatType.DM, Sender("bob", "bob"), "ap:abc123:o", "p1", reply_to=ref)
    await channel.answer_press(press, "Only the person who asked (or an owner) can answer this.")
    await channel.close_question(Target("t1", ChatType.DM), ref, "allowed once by alice")
    assert heard == [("ask", "alice", "Approval needed"),
                     ("note", "bob", "Only the person who asked (or an owner) can answer this."),
                     ("closed", "alice", "allowed once by alice")]
    assert channel.questions == {}


@pytest.mark.parametrize(("sender", "session", "owner", "counts_as"), [
    ("alice", "agent:main:dm:alice:thread:w1", True, "person:alice"),  # linked: her workspace, an owner
    ("telegram:43", "agent:main:dm:bob:thread:w1", False, "person:bob"),
    ("slack:U9", "agent:main:slack:dm:U9:thread:w1", False, "slack:U9"),  # as in their Slack DMs
    ("nobody", None, False, "webchat:nobody"),
])
async def test_the_senders_are_people(sender: str, session: str | None, owner: bool, counts_as: str) -> None:
    owners = {("telegram", "42")}
    people = Directory("main", LINKS, ChannelInfo("webchat"), lambda p: any(a in owners for a in p.accounts))
    channel = WebChannel(people=people)
    assert isinstance(channel, OfPeople)
    msg = InboundMessage("webchat", "webchat", "w1", ChatType.DM, Sender(sender, sender), "/status", "m1")
    found = channel.conversation_of(msg)
    assert (found.session_key if found is not None else None) == session
    access = Access({"telegram": AccessConfig(owners=["42"])}, store=None,  # type: ignore[arg-type]
                    channels={"webchat": channel})
    assert access.is_owner(msg) is owner
    assert access.is_owner_of("console", "anyone")  # a platform with no policy and no people: the local user
    assert person_named(sender, LINKS) is not None or session is None
    assert limit_keys(msg, None, channel) == (counts_as,)  # their limits and budgets, wherever they write
