"""Pairing end to end: Access on a real SQLite store, time from a fake clock."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from bot.access import Access, Action
from bot.config import AccessConfig
from bot.messages import ChatType, InboundMessage, Sender
from bot.pairing import ALPHABET, CODE_LENGTH, new_code, normalize_code, pairing_reply
from bot.store.sqlite import SQLiteStore

CODE = re.compile(r"approve ([A-Z0-9]{8}) ")


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store() -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(":memory:") as opened:
        yield opened


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def access(store: SQLiteStore, clock: Clock) -> Access:
    policies = {"telegram": AccessConfig(dm_policy="pairing", owners=("1",)), "discord": AccessConfig(dm_policy="pairing")}
    return Access(policies, store, clock=clock)


def dm(user: str, platform: str = "telegram", account: str = "bot") -> InboundMessage:
    return InboundMessage(platform, account, user, ChatType.DM, Sender(user, f"User {user}"), "hello", "m1")


async def code_for(access: Access, user: str, platform: str = "telegram", account: str = "bot") -> str:
    decision = await access.check(dm(user, platform, account))
    assert decision.action == Action.PAIR, decision
    assert decision.reply is not None
    found = CODE.search(decision.reply)
    assert found, decision.reply
    return found.group(1)


async def test_unknown_sender_pairs_and_is_let_in_once_approved(access: Access, store: SQLiteStore,
                                                                  clock: Clock) -> None:  # fmt: skip
    code = await code_for(access, "42")
    assert len(code) == CODE_LENGTH and set(code) <= set(ALPHABET)
    assert (await access.check(dm("42"))).action == Action.IGNORE  # told once an hour, like a refusal
    [pending] = await store.pending_pairings(clock.now)
    assert (pending.code, pending.user_id, pending.user_name) == (code, "42", "User 42")  # the same code waits

    clock.now += 600
    assert await store.approve_pairing(code.lower(), clock.now) is not None

    assert (await access.check(dm("42"))).action == Action.RUN
    assert await store.pending_pairings(clock.now) == []
    assert await store.approve_pairing(code, clock.now) is None  # a code is used once
    assert (await access.check(dm("42", "discord"))).action == Action.PAIR  # approval is per platform


async def test_revoked_sender_must_pair_again(access: Access, store: SQLiteStore, clock: Clock) -> None:
    first = await code_for(access, "42")
    await store.approve_pairing(first, clock.now)
    assert (await access.check(dm("42"))).action == Action.RUN

    assert await store.revoke_sender("telegram", "42") is True
    assert await store.revoke_sender("telegram", "42") is False
    clock.now += 3600  # the pairing reply is throttled like a notice: once an hour
    second = await code_for(access, "42")
    assert second != first


async def test_a_code_expires_after_an_hour(access: Access, store: SQLiteStore, clock: Clock) -> None:
    first = await code_for(access, "42")
    clock.now += 3599
    assert [c.code for c in await store.pending_pairings(clock.now)] == [first]
    clock.now += 1
    assert await store.approve_pairing(first, clock.now) is None
    second = await code_for(access, "42")
    assert second != first
    assert await store.approve_pairing(second, clock.now) is not None
    assert (await access.check(dm("42"))).action == Action.RUN


async def test_throwaway_accounts_cannot_push_out_a_waiting_code(access: Access, store: SQLiteStore,
                                                                  clock: Clock) -> None:  # fmt: skip
    legit = await code_for(access, "42")
    for user in ("a", "b"):  # throwaway accounts fill the other places
        clock.now += 1
        await code_for(access, user)
    clock.now += 1
    told = await access.check(dm("c"))  # the one over the cap gets no code and drops none
    assert told.action == Action.REFUSE and told.reply and "try again later" in told.reply
    assert "approve" not in told.reply
    assert (await access.check(dm("c"))).action == Action.IGNORE  # told once an hour
    assert [c.user_id for c in await store.pending_pairings(clock.now)] == ["42", "a", "b"]
    clock.now += 600
    assert await store.approve_pairing(legit, clock.now) is not None  # still valid, still approvable
    assert (await access.check(dm("42"))).action == Action.RUN
    await code_for(access, "c", "discord")  # another platform has its own three


async def test_a_sender_told_to_try_later_gets_their_code_when_there_is_room(access: Access, store: SQLiteStore,
                                                                             clock: Clock) -> None:  # fmt: skip
    first = await code_for(access, "a")
    for user in ("b", "c"):
        await code_for(access, user)
    assert (await access.check(dm("d"))).action == Action.REFUSE  # try later
    await store.approve_pairing(first, clock.now)
    clock.now += 60  # well within the hour of the notice
    code = await code_for(access, "d")  # made for them, so sent to them: never a silent code
    assert await store.approve_pairing(code, clock.now) is not None


async def test_a_reissued_code_is_sent_at_once(access: Access, store: SQLiteStore, clock: Clock) -> None:
    first = await code_for(access, "42")
    await store.approve_pairing(first, clock.now)
    await store.revoke_sender("telegram", "42")
    clock.now += 60
    decision = await access.check(dm("42"))  # a new code within the hour is sent, not swallowed
    assert decision.action == Action.PAIR and decision.reply
    assert decision.reply.startswith("Your earlier code is no longer valid.")
    second = CODE.search(decision.reply).group(1)  # type: ignore[union-attr]
    assert second != first and await store.approve_pairing(second, clock.now) is not None


async def test_pending_codes_are_capped_per_bot_account(access: Access, store: SQLiteStore, clock: Clock) -> None:
    for user in ("a", "b", "c"):
        await code_for(access, user)
    assert (await access.check(dm("d"))).action == Action.REFUSE
    await code_for(access, "e", account="other-bot")  # another bot of the platform has its own three


async def test_the_owner_and_approved_senders_never_get_a_code(access: Access, store: SQLiteStore,
                                                                clock: Clock) -> None:  # fmt: skip
    assert (await access.check(dm("1"))).action == Action.RUN
    await store.approve_pairing(await code_for(access, "42"), clock.now)
    assert (await access.check(dm("42"))).action == Action.RUN
    assert [c.user_id for c in await store.pending_pairings(clock.now)] == []


async def test_an_approved_sender_passes_an_allowlist_too(store: SQLiteStore, clock: Clock) -> None:
    pairing = Access({"telegram": AccessConfig(dm_policy="pairing")}, store, clock=clock)
    allowlist = Access({"telegram": AccessConfig(dm_policy="allowlist")}, store, clock=clock)
    assert (await allowlist.check(dm("42"))).action == Action.REFUSE
    await store.approve_pairing(await code_for(pairing, "42"), clock.now)
    assert (await allowlist.check(dm("42"))).action == Action.RUN


def test_codes_are_random_and_unambiguous() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    assert all(len(c) == 8 and not set(c) & set("0O1I") for c in codes)


@pytest.mark.parametrize(
    ("typed", "code"), [("abcd2345", "ABCD2345"), (" ABCD-2345 ", "ABCD2345"), ("abcd 2345\n", "ABCD2345")]
)
def test_normalize_code(typed: str, code: str) -> None:
    assert normalize_code(typed) == code


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(3600, "1 hour"), (3599.5, "1 hour"), (3000, "50 more minutes"), (61, "2 more minutes"), (1, "1 more minute")],
)
def test_pairing_reply_says_how_long_the_code_is_valid(seconds: float, said: str) -> None:
    assert pairing_reply("ABCD2345", seconds) == (
        f"To talk to me, ask the owner to run: chatgate pairing approve ABCD2345 (valid for {said})."
    )
