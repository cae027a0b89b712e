"""The access policy as a table of (policy, message) -> action, plus notices, owners,
the bot-loop guard and the group context buffer. A scripted PairingStore stands in for
the database here; tests/test_pairing.py runs the pairing flow on SQLite."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from bot.access import Access, Action, GroupContext, Verdict, access_policies
from bot.config import AccessConfig
from bot.messages import ChatType, InboundMessage, Sender
from bot.settings import ChannelsConfig, Config
from bot.store.base import ApprovedSender, PairingCode


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakePairingStore:
    """A PairingStore that approves whom it is told and hands out scripted codes."""

    approved: set[tuple[str, str]] = field(default_factory=set)
    full: bool = False  # True: no code can be issued (too many pending)
    code: str = "ABCD2345"  # the code it hands out
    requests: list[tuple[str, str]] = field(default_factory=list)
    origins: list[str | None] = field(default_factory=list)

    async def pairing_request(self, platform: str, user_id: str, name: str, *, now: float, ttl: float = 3600.0,
                              max_pending: int = 3, origin: str | None = None) -> PairingCode | None:  # fmt: skip
        self.requests.append((platform, user_id))
        self.origins.append(origin)
        return None if self.full else PairingCode(self.code, platform, user_id, name, now, now + ttl)

    async def pending_pairings(self, now: float) -> list[PairingCode]:
        return []

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None:
        return None

    async def revoke_sender(self, platform: str, user_id: str) -> bool:
        return False

    async def is_approved(self, platform: str, user_id: str) -> bool:
        return (platform, user_id) in self.approved

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]:
        return []


STRANGER, FRIEND, OWNER, PAIRED = "666", "100", "1", "200"


def msg(sender: str = STRANGER, *, chat: str | None = None, addressed: bool = True, platform: str = "telegram",
        thread: str | None = None, is_bot: bool = False, name: str = "", text: str = "hi",
        account: str = "bot") -> InboundMessage:  # fmt: skip
    """A DM from ``sender``, or with ``chat`` a group message."""
    return InboundMessage(
        platform=platform, account=account, chat_id=chat or sender,
        chat_type=ChatType.GROUP if chat else ChatType.DM,
        sender=Sender(sender, name or f"user {sender}", is_bot=is_bot), text=text, message_id="m",
        addressed=addressed, thread_id=thread,
    )  # fmt: skip


def access(policy: AccessConfig | None = None, *, clock: Clock | None = None, store: FakePairingStore | None = None,
           **kw: Any) -> Access:  # fmt: skip
    if store is None:
        store = FakePairingStore(approved={("telegram", PAIRED)})
    policies = {} if policy is None else {"telegram": policy}
    return Access(policies, store, clock=clock or Clock(), **kw)


def policy(**kw: Any) -> AccessConfig:
    return AccessConfig(allow_from=(FRIEND,), owners=(OWNER,), **kw)


R, I, C, P, X = Action.RUN, Action.IGNORE, Action.CONTEXT, Action.PAIR, Action.REFUSE

CASES = [
    # -- DMs --
    ("dm disabled, stranger", policy(dm_policy="disabled"), msg(), I),
    ("dm disabled, even a friend", policy(dm_policy="disabled"), msg(FRIEND), I),
    ("dm disabled, even the owner", policy(dm_policy="disabled"), msg(OWNER), I),
    ("dm open, stranger", policy(dm_policy="open"), msg(), R),
    ("dm allowlist, stranger", policy(dm_policy="allowlist"), msg(), X),
    ("dm allowlist, allow_from", policy(dm_policy="allowlist"), msg(FRIEND), R),
    ("dm allowlist, owner", policy(dm_policy="allowlist"), msg(OWNER), R),
    ("dm allowlist, approved by pairing", policy(dm_policy="allowlist"), msg(PAIRED), R),
    ("dm pairing, stranger", policy(dm_policy="pairing"), msg(), P),
    ("dm pairing, allow_from", policy(dm_policy="pairing"), msg(FRIEND), R),
    ("dm pairing, owner", policy(dm_policy="pairing"), msg(OWNER), R),
    ("dm pairing, approved", policy(dm_policy="pairing"), msg(PAIRED), R),
    ("default config, stranger dm", AccessConfig(), msg(), X),
    ("default config, unaddressed dm still runs", policy(), msg(FRIEND, addressed=False), R),
    # -- groups --
    ("groups disabled", policy(group_policy="disabled", groups=("*",)), msg(chat="g1"), I),
    ("groups disabled, owner", policy(group_policy="disabled"), msg(OWNER, chat="g1"), I),
    ("default config, any group", AccessConfig(), msg(FRIEND, chat="g1"), I),
    ("allowlist, listed group, addressed", policy(groups=("g1",)), msg(chat="g1"), R),
    ("allowlist, listed group, not addressed", policy(groups=("g1",)), msg(chat="g1", addressed=False), C),
    ("allowlist, other group, addressed", policy(groups=("g1",)), msg(chat="g2"), I),
    ("allowlist, other group, not addressed", policy(groups=("g1",)), msg(chat="g2", addressed=False), I),
    ("allowlist, other group, owner", policy(groups=("g1",)), msg(OWNER, chat="g2"), I),
    ("allowlist *, any group", policy(groups=("*",)), msg(chat="g9"), R),
    ("allowlist, empty list", policy(groups=()), msg(chat="g1"), I),
    ("open group, addressed", policy(group_policy="open"), msg(chat="g1"), R),
    ("open group, not addressed", policy(group_policy="open"), msg(chat="g1", addressed=False), C),
    ("no mention needed", policy(group_policy="open", require_mention=False), msg(chat="g1", addressed=False), R),
    ("member not on allow_from", policy(groups=("g1",), dm_policy="disabled"), msg(STRANGER, chat="g1"), R),
    ("dm policy does not open groups", policy(dm_policy="open"), msg(chat="g1"), I),
    ("group policy does not open dms", policy(group_policy="open"), msg(), X),
    # -- a platform without a policy: the local console --
    ("console dm", None, msg(platform="console"), R),
    ("console group, addressed", None, msg(chat="g1", platform="console"), R),
    ("console group, not addressed", None, msg(chat="g1", platform="console", addressed=False), C),
]


@pytest.mark.parametrize(("policy_", "message", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_policy_table(policy_: AccessConfig | None, message: InboundMessage, expected: Action) -> None:
    decision = await access(policy_).check(message)
    assert decision.action == expected, decision.reason
    assert (decision.reply is not None) == (expected in (P, X))
    assert decision.reason


async def test_refused_group_messages_and_ignored_dms_never_touch_the_store() -> None:
    store = FakePairingStore()
    check = access(policy(dm_policy="pairing", groups=("g1",)), store=store).check
    for message in (msg(chat="g2"), msg(FRIEND), msg(chat="g1"), msg(chat="g1", addressed=False)):
        await check(message)
    assert store.requests == []


# -- notices --------------------------------------------------------------------------


async def test_allowlist_notice_names_the_id_and_comes_once_per_hour() -> None:
    clock = Clock()
    a = access(policy(), clock=clock)

    first = await a.check(msg("123"))
    assert first == Verdict(
        Action.REFUSE,
        "Sorry, I only talk to people on my allowlist. Your telegram id is 123 — ask the owner to add it.",
        first.reason,
    )
    assert (await a.check(msg("123"))).action == I
    clock.advance(3599)
    assert (await a.check(msg("123"))).action == I
    assert (await a.check(msg("124"))).action == X  # another sender has their own hour
    clock.advance(1)
    assert (await a.check(msg("123"))).action == X


async def test_pairing_gives_the_code_once_an_hour() -> None:
    clock = Clock()
    a = access(policy(dm_policy="pairing"), clock=clock)
    decision = await a.check(msg())
    assert decision.action == P
    assert decision.reply == "To talk to me, ask the owner to run: chatgate pairing approve ABCD2345 (valid for 1 hour)."
    assert [(await a.check(msg())).action for _ in range(3)] == [I, I, I]  # throttled like a refusal
    clock.advance(3600)
    assert (await a.check(msg())).action == P


async def test_when_no_code_can_be_issued_the_notice_comes_once_per_hour() -> None:
    clock, store = Clock(), FakePairingStore(full=True)
    a = access(policy(dm_policy="pairing"), clock=clock, store=store)

    first = await a.check(msg())
    assert first.action == X and first.reply and "try again later" in first.reply
    assert (await a.check(msg())).action == I
    clock.advance(3600)
    assert (await a.check(msg())).action == X
    store.full = False
    clock.advance(3600)
    assert (await a.check(msg())).action == P  # a code once there is room


async def test_a_code_is_sent_once_there_is_room_even_within_the_hour() -> None:
    clock, store = Clock(), FakePairingStore(full=True)
    a = access(policy(dm_policy="pairing"), clock=clock, store=store)
    assert (await a.check(msg())).action == X  # try later
    store.full = False
    clock.advance(60)
    decision = await a.check(msg())  # a code made for them is never left unsent
    assert decision.action == P and decision.reply and "approve ABCD2345" in decision.reply
    assert (await a.check(msg())).action == I
    assert store.origins == ["telegram:bot"] * 3  # the platform and the bot account written to


async def test_a_replaced_code_is_sent_with_word_that_the_old_one_is_void() -> None:
    clock, store = Clock(), FakePairingStore()
    a = access(policy(dm_policy="pairing"), clock=clock, store=store)
    assert (await a.check(msg())).action == P
    store.code = "WXYZ6789"  # e.g. the first was revoked, or expired
    clock.advance(60)
    decision = await a.check(msg())
    assert decision == Verdict(P, "Your earlier code is no longer valid. To talk to me, ask the owner to run: "
                                   "chatgate pairing approve WXYZ6789 (valid for 1 hour).", decision.reason)
    assert [(await a.check(msg())).action for _ in range(3)] == [I, I, I]  # the same code: once an hour


# -- owners ---------------------------------------------------------------------------


def test_owners_are_per_platform_and_the_console_user_is_one() -> None:
    a = Access({"telegram": policy(), "discord": AccessConfig(owners=("7",))}, FakePairingStore())
    assert a.is_owner(msg(OWNER))
    assert not a.is_owner(msg(FRIEND))  # allowed to talk is not allowed to administer
    assert not a.is_owner(msg(PAIRED))
    assert not a.is_owner(msg(OWNER, platform="discord"))
    assert a.is_owner(msg("7", platform="discord"))
    assert a.is_owner(msg(OWNER, chat="g1"))  # in groups too
    assert a.is_owner(msg("anyone", platform="console"))


def test_every_real_platform_gets_its_policy_from_the_config() -> None:
    channels = ChannelsConfig(telegram={"allow_from": ["5"]})  # type: ignore[arg-type]
    policies = access_policies(channels)
    assert set(policies) == {"telegram", "discord", "slack", "whatsapp"}  # enabled or not: never open by omission
    assert policies["telegram"].allow_from == ("5",)
    assert policies["slack"].dm_policy == "allowlist"
    assert access_policies(Config().channels).keys() == policies.keys()


# -- the bot-loop guard ---------------------------------------------------------------


async def test_the_21st_bot_message_in_a_minute_starts_a_cooldown() -> None:
    clock = Clock()
    a = access(policy(dm_policy="open"), clock=clock)
    bot, other = msg("b1", is_bot=True), msg("b2", is_bot=True)

    for _ in range(20):
        assert (await a.check(bot)).action == R
        clock.advance(1)
    guarded = await a.check(bot)
    assert guarded.action == I and guarded.reason == "bot loop guard"
    assert (await a.check(other)).action == R  # per bot
    assert (await a.check(msg("human"))).action == R  # humans are not counted

    clock.advance(299)
    assert (await a.check(bot)).action == I
    clock.advance(1)
    for _ in range(20):
        assert (await a.check(bot)).action == R  # heard again, with a fresh window
    assert (await a.check(bot)).action == I


async def test_the_bot_guard_counts_per_chat() -> None:
    """A bot busy in one chat (Telegram's anonymous-admin placeholder is one bot id in every
    group) is not cooled down in another."""
    a = access(policy(dm_policy="open", group_policy="open", require_mention=False))
    for _ in range(21):
        await a.check(msg("b1", chat="g1", is_bot=True))
    assert (await a.check(msg("b1", chat="g1", is_bot=True))).action == I
    assert (await a.check(msg("b1", chat="g2", is_bot=True))).action == R


async def test_the_bot_window_slides() -> None:
    clock = Clock()
    a = access(policy(dm_policy="open"), clock=clock)
    bot = msg("b1", is_bot=True)
    for _ in range(20):
        assert (await a.check(bot)).action == R
    clock.advance(60)
    for _ in range(20):
        assert (await a.check(bot)).action == R
    assert (await a.check(bot)).action == I


async def test_bot_messages_kept_as_context_do_not_count() -> None:
    a = access(policy(groups=("g1",)))
    for _ in range(30):
        assert (await a.check(msg("b1", chat="g1", addressed=False, is_bot=True))).action == C
    assert (await a.check(msg("b1", chat="g1", is_bot=True))).action == R


async def test_a_bot_is_told_once_and_its_pairing_replies_are_capped() -> None:
    a = access(policy(dm_policy="pairing"))
    actions = [(await a.check(msg("b1", is_bot=True))).action for _ in range(25)]
    assert actions == [P] + [I] * 24  # no endless code ping-pong with an auto-replying bot


# -- group context --------------------------------------------------------------------


def test_group_context_keeps_the_last_50_and_take_clears() -> None:
    ctx = GroupContext()
    for i in range(60):
        ctx.remember(msg(str(i), chat="g1", addressed=False, text=f"m{i}"))
    taken = ctx.take(msg(OWNER, chat="g1"))
    assert [m.text for m in taken] == [f"m{i}" for i in range(10, 60)]
    assert ctx.take(msg(OWNER, chat="g1")) == ()


def test_group_context_is_per_chat_thread_and_platform() -> None:
    ctx = GroupContext()
    ctx.remember(msg("a", chat="g1", addressed=False, text="main"))
    ctx.remember(msg("a", chat="g1", thread="t1", addressed=False, text="in t1"))
    ctx.remember(msg("a", chat="g1", thread="t2", addressed=False, text="in t2"))
    ctx.remember(msg("a", chat="g2", addressed=False, text="other chat"))
    ctx.remember(msg("a", chat="g1", platform="discord", addressed=False, text="other platform"))

    assert [m.text for m in ctx.take(msg("b", chat="g1", thread="t1"))] == ["in t1"]
    assert [m.text for m in ctx.take(msg("b", chat="g1"))] == ["main"]
    assert [m.text for m in ctx.take(msg("b", chat="g1", thread="t2"))] == ["in t2"]
    assert [m.text for m in ctx.take(msg("b", chat="g2"))] == ["other chat"]
    assert ctx.take(msg("b", chat="g1", thread="t1")) == ()


def test_a_message_that_opens_its_own_thread_reads_the_chat_context() -> None:
    ctx = GroupContext()
    ctx.remember(msg("a", chat="g1", addressed=False, text="top level"))
    ctx.remember(msg("a", chat="g1", thread="t1", addressed=False, text="in t1"))
    opener = replace(msg("b", chat="g1", thread="m"), message_id="m")  # Slack: a mention opening thread "m"
    assert [m.text for m in ctx.take(opener)] == ["top level"]
    assert [m.text for m in ctx.take(msg("b", chat="g1", thread="t1"))] == ["in t1"]


def test_group_context_forgets_the_least_recently_used_chat() -> None:
    ctx = GroupContext(limit=5, max_chats=2)
    for chat in ("g1", "g2", "g1", "g3"):  # g2 is the stalest when g3 arrives
        ctx.remember(msg("a", chat=chat, addressed=False))
    assert len(ctx.take(msg("b", chat="g1"))) == 2
    assert ctx.take(msg("b", chat="g2")) == ()
    assert len(ctx.take(msg("b", chat="g3"))) == 1



# -- issue 19, item 9: the context buffer keeps only what is shown, under a global budget

def test_the_context_buffer_keeps_only_what_is_shown_under_its_byte_budget() -> None:
    import tracemalloc

    from bot.access import MAX_CONTEXT_CHARS, context_size

    budget = 2 * 1024 * 1024
    ctx = GroupContext(limit=50, max_chats=1000, max_bytes=budget)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(3000):  # 3000 messages of 100 KB: 300 MB if kept whole
            m = InboundMessage("telegram", "bot", f"-{i % 200}", ChatType.GROUP, Sender(str(i), "N" * 5000),
                               "x" * 100_000, str(i), addressed=False)
            ctx.remember(m)
            assert ctx.bytes <= budget
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held < budget * 2, held
    last = InboundMessage("telegram", "bot", f"-{2999 % 200}", ChatType.GROUP, Sender("1", "A"), "@bot hi", "z")
    taken = ctx.take(last)
    assert taken and all(len(m.text) == MAX_CONTEXT_CHARS + 1 and len(m.sender.name) <= 65 for m in taken)
    assert ctx.bytes == sum(context_size(m) for key in list(ctx._chats) for m, _ in ctx._chats[key])
