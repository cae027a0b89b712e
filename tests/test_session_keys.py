import pytest

from bot.messages import ChatType, InboundMessage, Sender
from bot.session_keys import SessionKey, format_key, key_for, parse_key


def inbound(platform: str = "telegram", chat_type: ChatType = ChatType.DM, chat: str = "42",
            user: str = "42", thread: str | None = None) -> InboundMessage:
    return InboundMessage(platform, "bot1", chat, chat_type, Sender(user, "Ann"), "hi", "m1", thread_id=thread)


LINKS = {"ann": ["telegram:42", "discord:9001"]}

KEYS = [
    # (description, inbound, dm_scope, expected key)
    ("telegram DM", inbound(), "per-user", "agent:main:telegram:dm:42"),
    ("discord DM", inbound("discord", user="9001", chat="dmchan"), "per-user", "agent:main:discord:dm:9001"),
    ("group", inbound(chat_type=ChatType.GROUP, chat="-100123", user="7"), "per-user", "agent:main:telegram:group:-100123"),
    ("forum topic", inbound(chat_type=ChatType.GROUP, chat="-100123", thread="5"), "per-user",
     "agent:main:telegram:group:-100123:thread:5"),
    ("slack thread ts", inbound("slack", ChatType.GROUP, "C1", "U1", "1700000000.000100"), "per-user",
     "agent:main:slack:group:C1:thread:1700000000.000100"),
    ("slack DM thread (assistant)", inbound("slack", chat="D1", user="U1", thread="1700000000.000200"), "per-user",
     "agent:main:slack:dm:U1:thread:1700000000.000200"),
    ("linked DM, telegram", inbound(), "linked", "agent:main:dm:ann"),
    ("linked DM, discord", inbound("discord", user="9001"), "linked", "agent:main:dm:ann"),
    ("linked scope, unlinked user", inbound(user="77", chat="77"), "linked", "agent:main:telegram:dm:77"),
    ("linked scope never merges groups", inbound(chat_type=ChatType.GROUP, chat="g"), "linked",
     "agent:main:telegram:group:g"),
    ("colon in id is escaped", inbound("matrix", user="@ann:example.org"), "per-user",
     "agent:main:matrix:dm:@ann%3Aexample.org"),
    ("percent in id is escaped", inbound(user="50%"), "per-user", "agent:main:telegram:dm:50%25"),
]


@pytest.mark.parametrize(("msg", "scope", "expected"), [k[1:] for k in KEYS], ids=[k[0] for k in KEYS])
def test_key_for_every_context(msg: InboundMessage, scope: str, expected: str) -> None:
    key = key_for(msg, "main", dm_scope=scope, identity_links=LINKS)  # type: ignore[arg-type]
    assert str(key) == expected
    assert parse_key(expected) == key


ROUND_TRIP = [
    SessionKey("main", ChatType.DM, "42", "telegram"),
    SessionKey("a:b", ChatType.DM, "x:y%z", "p:q"),
    SessionKey("main", ChatType.DM, "ann"),
    SessionKey("main", ChatType.GROUP, "-1", "telegram", "t:1"),
    SessionKey("main", ChatType.GROUP, "C1", "slack", "1.2").sub(1),
    SessionKey("main", ChatType.DM, "42", "telegram").sub(2).sub(3),
    SessionKey("main", ChatType.GROUP, "%3A", "telegram"),
]


@pytest.mark.parametrize("key", ROUND_TRIP, ids=str)
def test_round_trip(key: SessionKey) -> None:
    raw = format_key(key)
    assert parse_key(raw) == key
    assert all(part for part in raw.split(":"))


def test_sub_agent_key_extends_parent() -> None:
    parent = SessionKey("main", ChatType.DM, "42", "telegram")
    child = parent.sub(1)
    assert str(child) == "agent:main:telegram:dm:42:sub:1"


def test_two_users_never_share_a_dm_session() -> None:
    a = key_for(inbound(user="1", chat="1"), "main")
    b = key_for(inbound(user="2", chat="2"), "main")
    assert a != b


@pytest.mark.parametrize("raw", [
    "", "agent", "agent:main", "session:main:telegram:dm:1", "agent:main:telegram:chan:1",
    "agent:main:telegram:dm:1:thread", "agent:main:telegram:dm:1:sub:x", "agent:main:telegram:dm:1:foo:2",
    "agent:main:telegram:group:1:sub:1:thread:2",
])
def test_parse_refuses_what_format_never_builds(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_key(raw)


def test_empty_parts_are_refused() -> None:
    with pytest.raises(ValueError):
        format_key(SessionKey("main", ChatType.DM, "", "telegram"))
