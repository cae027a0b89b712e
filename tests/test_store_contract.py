"""The Store contract: every implementation must pass this suite.

Add an implementation by adding a factory to ``FACTORIES``. The PostgreSQL one gets a database
of its own per test, and skips (one line) when no server answers (``tests/pg.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import pytest

from bot.conversation import Conversation
from bot.llm import ImagePart, Message, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.messages import (
    Answer,
    Attachment,
    AttachmentKind,
    ChatType,
    Chunk,
    FileRef,
    InboundMessage,
    Purpose,
    Sender,
    Target,
)
from bot.providers.base import Usage
from bot.schedules.jobs import Claim, Closing, Job, JobKind, JobState, RuleKind, ScheduleStore, When
from bot.schedules.store import Closes, StoredSchedules
from bot.store.base import (
    AnswerStore,
    ApprovedSender,
    CompactingStore,
    ModelChoice,
    ModelStore,
    NoteStore,
    PairingCode,
    PairingStore,
    Recent,
    Session,
    Store,
    Summary,
    Turn,
    UsageTotals,
)
from bot.store.sqlite import SQLiteStore
from tests.pg import postgres_store

if TYPE_CHECKING:
    from bot.dashboard.reads import Reads
    from bot.store.base import AppStore

StoreFactory = Callable[[Path], AbstractAsyncContextManager[Store]]

FACTORIES: dict[str, StoreFactory] = {
    "sqlite-file": lambda tmp: SQLiteStore(tmp / "data" / "chatgate.db"),
    "sqlite-memory": lambda tmp: SQLiteStore(":memory:"),
    "postgres": lambda tmp: postgres_store(),
}


@pytest.fixture(params=sorted(FACTORIES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with FACTORIES[request.param](tmp_path) as opened:
        yield opened


def inbound(message_id: str = "m1", *, chat_id: str = "c1", platform: str = "telegram", account: str = "bot1",
            text: str = "hello", attachments: tuple[Attachment, ...] = ()) -> InboundMessage:  # fmt: skip
    return InboundMessage(
        platform=platform,
        account=account,
        chat_id=chat_id,
        chat_type=ChatType.GROUP,
        sender=Sender("u1", "Ada", "ada", is_bot=False),
        text=text,
        message_id=message_id,
        thread_id="t9",
        reply_to="m0",
        attachments=attachments,
        timestamp=1700000000.125,
    )


def turn(session: Session, run_id: str, *messages: Message, **kw: object) -> Turn:
    return Turn(session=session, run_id=run_id, messages=messages, **kw)  # type: ignore[arg-type]


# -- sessions ---------------------------------------------------------------------------


async def test_session_is_created_once_per_key(store: Store) -> None:
    a = await store.session("agent:main:telegram:dm:1")
    again = await store.session("agent:main:telegram:dm:1")
    other = await store.session("agent:main:telegram:dm:2")
    assert a == again
    assert a.key == "agent:main:telegram:dm:1"
    assert other.id != a.id


async def test_a_conversation_is_its_session_key_at_the_store_edge(store: Store) -> None:
    conversation = Conversation.of_key("agent:main:telegram:dm:42")
    session = await store.session(conversation)
    assert session == await store.session("agent:main:telegram:dm:42")
    inbound_id = await store.record_inbound(inbound("m9", chat_id="42"), conversation)
    assert inbound_id is not None
    assert [r.session_key for r in await store.unanswered()] == ["agent:main:telegram:dm:42"]


async def test_concurrent_first_use_of_a_key_makes_one_session(store: Store) -> None:
    sessions = await asyncio.gather(*(store.session("k") for _ in range(20)))
    assert len({s.id for s in sessions}) == 1


async def test_fresh_session_keeps_old_history_reachable(store: Store) -> None:
    old = await store.session("k")
    await store.append_turn(turn(old, "r1", Message.user("before"), Message.assistant("old answer")))

    new = await store.session("k", fresh=True)

    assert new.id != old.id and new.key == old.key
    assert await store.session("k") == new
    assert await store.history(new) == []
    assert [m.text for m in await store.history(old)] == ["before", "old answer"]


async def test_fresh_on_an_unknown_key_creates_it(store: Store) -> None:
    s = await store.session("never-seen", fresh=True)
    assert await store.session("never-seen") == s


async def test_fresh_twice_keeps_every_generation(store: Store) -> None:
    generations = [await store.session("k")]
    for i in range(2):
        await store.append_turn(turn(generations[-1], f"r{i}", Message.user(f"gen {i}")))
        generations.append(await store.session("k", fresh=True))
    assert [[m.text for m in await store.history(s)] for s in generations] == [["gen 0"], ["gen 1"], []]


# -- history ----------------------------------------------------------------------------


async def test_history_is_in_order_and_recent_takes_the_last(store: CompactingStore) -> None:
    s = await store.session("k")
    for t in range(4):
        await store.append_turn(turn(s, f"r{t}", Message.user(f"q{t}"), Message.assistant(f"a{t}")))

    texts = [m.text for m in await store.history(s)]
    assert texts == ["q0", "a0", "q1", "a1", "q2", "a2", "q3", "a3"]
    assert [m.text for m in (await store.recent(s, 3)).messages] == ["a2", "q3", "a3"]
    assert [m.text for m in (await store.recent(s, 100)).messages] == texts


async def test_every_part_type_round_trips(store: Store) -> None:
    s = await store.session("k")
    messages = (
        Message(Role.USER, (TextPart("look at this 🦊 — «ünïcode»"), ImagePart("image/png", "iVBORw0KGgo="))),
        Message(
            Role.ASSISTANT,
            (
                ThinkingPart("let me think", signature="sig-abc=="),
                ThinkingPart("", redacted_data="opaque-blob"),
                TextPart("calling a tool"),
                ToolCall("call_1", "read_file", '{"path": "notes.md", "quote": "a \\"b\\""}'),
            ),
        ),
        Message(Role.TOOL, (ToolResult("call_1", "no such file", is_error=True),)),
        Message(Role.ASSISTANT, ()),
    )
    await store.append_turn(turn(s, "r1", *messages))
    assert tuple(await store.history(s)) == messages


async def test_tool_calls_and_results_stay_paired_in_order(store: Store) -> None:
    s = await store.session("k")
    calls = (ToolCall("a", "exec", '{"cmd": "ls"}'), ToolCall("b", "read_file", '{"path": "x"}'))
    await store.append_turn(
        turn(
            s,
            "r1",
            Message.user("do two things"),
            Message(Role.ASSISTANT, calls),
            Message(Role.TOOL, (ToolResult("a", "x\ny"), ToolResult("b", "denied", is_error=True))),
            Message(Role.ASSISTANT, (ToolCall("c", "exec", "{}"),)),
            Message(Role.TOOL, (ToolResult("c", "ok"),)),
            Message.assistant("done"),
        )
    )
    history = await store.history(s)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    for i, m in enumerate(history):
        if m.tool_calls:
            results = history[i + 1].tool_results
            assert [r.tool_call_id for r in results] == [c.id for c in m.tool_calls]
    assert history[1].tool_calls == calls
    assert history[2].tool_results[1].is_error is True


async def test_sessions_do_not_share_history(store: Store) -> None:
    a, b = await store.session("a"), await store.session("b")
    await store.append_turn(turn(a, "r1", Message.user("for a")))
    await store.append_turn(turn(b, "r2", Message.user("for b")))
    assert [m.text for m in await store.history(a)] == ["for a"]
    assert [m.text for m in await store.history(b)] == ["for b"]


# -- inbound log ------------------------------------------------------------------------


async def test_redelivery_is_recognised(store: Store) -> None:
    first = await store.record_inbound(inbound("m1"), "k")
    assert isinstance(first, int)
    assert await store.record_inbound(inbound("m1", text="edited or not, same id"), "k") is None
    assert len(await store.unanswered()) == 1


async def test_when_a_chat_last_wrote_is_its_latest_messages_own_time(store: Store) -> None:
    from bot.store.inbound import last_heard

    steps: Any = store  # every store runs the operations (StepStore)
    assert await steps.read(last_heard("whatsapp", "bot1", "491701234567")) is None
    first = replace(inbound("w1", chat_id="491701234567", platform="whatsapp"), timestamp=1000.0)
    await store.record_inbound(first, "k")
    await store.record_inbound(replace(first, message_id="w2", timestamp=2000.0), "k")
    await store.record_inbound(replace(first, message_id="w3", chat_id="491709999999", timestamp=3000.0), "k")
    await store.record_inbound(replace(first, message_id="t1", platform="telegram", timestamp=4000.0), "k")
    assert await steps.read(last_heard("whatsapp", "bot1", "491701234567")) == 2000.0
    assert await steps.read(last_heard("whatsapp", "other", "491701234567")) is None  # another number
    future = await store.record_inbound(replace(first, message_id="w4", timestamp=time.time() + 86400), "k")
    at = await steps.read(last_heard("whatsapp", "bot1", "491701234567"))
    assert at is not None and at <= time.time()  # never later than it arrived
    assert future is not None
    await store.forget_inbound(future)  # refused: its payload is gone, its arrival kept
    assert await steps.read(last_heard("whatsapp", "bot1", "491701234567")) == at


async def test_a_burst_is_stored_at_once_and_its_repeats_are_redeliveries(store: Store) -> None:
    ids = await asyncio.gather(*(store.record_inbound(inbound(f"m{i % 200}", text=str(i)), "k") for i in range(250)))
    assert None not in ids[:200] and len(set(ids[:200])) == 200
    assert ids[200:] == [None] * 50  # the first of two equal keys is the message, the second a redelivery
    by_id = {r.id: r.message for r in await store.unanswered()}
    assert [by_id[i].text for i in ids[:200]] == [str(i) for i in range(200)]  # each id is its own row's
    assert await store.record_inbound(inbound("m7"), "k") is None and await store.record_inbound(inbound("m200"), "k")


async def test_same_message_id_elsewhere_is_a_new_message(store: Store) -> None:
    ids = [
        await store.record_inbound(inbound("m1", chat_id="c1"), "k1"),
        await store.record_inbound(inbound("m1", chat_id="c2"), "k2"),
        await store.record_inbound(inbound("m1", platform="slack"), "k3"),
        await store.record_inbound(inbound("m1", account="bot2"), "k4"),  # another bot in the same chat
    ]
    assert None not in ids
    assert len(set(ids)) == 4


async def test_unanswered_rebuilds_the_message_without_inline_data(store: Store) -> None:
    photo = Attachment(AttachmentKind.IMAGE, "cat.jpg", "image/jpeg", 3, path="/tmp/cat.jpg", data=b"\xff\xd8\xff",
                       platform_file_id="AgAD")  # fmt: skip
    original = inbound("m1", attachments=(photo,))
    row_id = await store.record_inbound(original, "agent:main:telegram:group:c1")

    [record] = await store.unanswered()

    assert record.id == row_id
    assert record.session_key == "agent:main:telegram:group:c1"
    assert record.received_at > 0
    assert record.message == replace(original, attachments=(replace(photo, data=None),))
    assert isinstance(record.message.chat_type, ChatType)
    assert isinstance(record.message.attachments[0].kind, AttachmentKind)


async def test_answered_via_turn_or_mark_answered_leave_unanswered(store: Store) -> None:
    s = await store.session("k")
    a, b, c, d = [await store.record_inbound(inbound(f"m{i}"), "k") for i in range(4)]
    assert None not in (a, b, c, d)
    assert [r.id for r in await store.unanswered()] == [a, b, c, d]  # oldest first

    await store.append_turn(turn(s, "r0", Message.user("cancelled"), inbound_ids=(a, b)))  # type: ignore[arg-type]
    assert [r.id for r in await store.unanswered()] == [a, b, c, d]  # a turn alone does not answer
    await store.append_turn(turn(s, "r1", Message.user("m0 and m1"), inbound_ids=(a, b), settle=True))  # type: ignore[arg-type]
    assert [r.id for r in await store.unanswered()] == [c, d]

    await store.mark_answered([d])  # type: ignore[attr-defined, list-item]
    await store.mark_answered([d])  # type: ignore[attr-defined, list-item]  # twice is harmless
    await store.mark_answered([])
    assert [r.id for r in await store.unanswered()] == [c]


# -- usage ------------------------------------------------------------------------------


async def test_usage_sums_tokens_cost_and_turns(store: Store) -> None:
    s, other = await store.session("k"), await store.session("other")
    assert await store.usage(s) == UsageTotals()

    await store.append_turn(turn(s, "r1", Message.user("a"), usage=Usage(100, 20, 5, 7), cost=0.25, model="m1"))
    await store.append_turn(turn(s, "r2", Message.user("b"), usage=Usage(50, 10, 0, 1), cost=0.125, model="m2"))
    await store.append_turn(turn(other, "r3", Message.user("c"), usage=Usage(1, 1, 1, 1), cost=9.0))

    totals = await store.usage(s)
    assert totals == UsageTotals(150, 30, 5, 8, pytest.approx(0.375), 2)  # type: ignore[arg-type]
    assert (await store.usage(other)).turns == 1
    await store.append_turn(turn(s, "r2-title", usage=Usage(3, 2), cost=0.001))  # a title's model call
    assert await store.usage(s) == UsageTotals(153, 32, 5, 8, pytest.approx(0.376), 2)  # type: ignore[arg-type]


# -- concurrency ------------------------------------------------------------------------

SESSIONS, TURNS, PER_TURN = 50, 4, 3


def _turn_messages(s: int, t: int) -> tuple[Message, ...]:
    return (
        Message.user(f"{s}:{t}:q"),
        Message(Role.ASSISTANT, (ToolCall(f"{s}-{t}", "exec", "{}"),)),
        Message(Role.TOOL, (ToolResult(f"{s}-{t}", f"{s}:{t}:r"),)),
    )


async def test_concurrent_writers_never_interleave_or_leak(store: Store) -> None:
    sessions = await asyncio.gather(*(store.session(f"agent:main:test:dm:{s}") for s in range(SESSIONS)))
    torn: list[int] = []

    async def writer(s: int) -> None:  # one session's turns are sequential, as its lane runs them
        for t in range(TURNS):
            await store.append_turn(turn(sessions[s], f"run-{s}-{t}", *_turn_messages(s, t), usage=Usage(1, 1)))
            await asyncio.sleep(0)

    async def reader(s: int) -> None:  # a read never sees part of a turn
        for _ in range(TURNS):
            n = len(await store.history(sessions[s]))
            if n % PER_TURN:
                torn.append(n)
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(s) for s in range(SESSIONS)), *(reader(s) for s in range(0, SESSIONS, 5)))

    assert torn == []
    for s, session in enumerate(sessions):
        expected = [m for t in range(TURNS) for m in _turn_messages(s, t)]
        assert await store.history(session) == expected
        assert (await store.usage(session)).turns == TURNS


async def test_closing_twice_is_harmless(store: Store) -> None:
    await store.close()
    await store.close()


async def test_traces_are_stored_with_their_turn_and_read_back_in_order(store: Store) -> None:
    from bot.tracing import Span, SpanKind, TraceRecord

    session = await store.session("agent:main:test:dm:u1")
    other = await store.session("agent:main:test:dm:u2")
    for i, s in enumerate((session, other, session)):
        record = TraceRecord(
            f"run{i}", s.key, "main", 100.0 + i, 101.0 + i, "completed", "m", 10, 5, 0.01, 2, None,
            (Span(SpanKind.LLM, "m", 100.0 + i, 12.5, 10, 5, 0.01), Span(SpanKind.TOOL, "read_file", 100.5 + i, 3.0,
                                                                            is_error=True, preview="no such file")),
        )
        await store.append_turn(turn(s, f"run{i}", Message.user("hi"), trace=record))
    assert [t.run_id for t in await store.traces()] == ["run0", "run1", "run2"]
    assert [t.run_id for t in await store.traces(last=1)] == ["run2"]
    mine = await store.traces(session.key)
    assert [t.run_id for t in mine] == ["run0", "run2"]
    assert mine[0].spans[1] == Span(SpanKind.TOOL, "read_file", 100.5, 3.0, is_error=True, preview="no such file")
    assert mine[0].cost == 0.01 and mine[0].iterations == 2


async def test_traces_keep_cache_tokens_and_why_the_model_was_used(store: Store) -> None:
    from bot.tracing import Span, SpanKind, TraceRecord

    session = await store.session("agent:main:test:dm:u1")
    span = Span(SpanKind.LLM, "claude-x", 100.0, 12.5, 1000, 5, 0.01, cache_read_tokens=900, cache_write_tokens=40)
    record = TraceRecord("run-c", session.key, "main", 100.0, 101.0, "completed", "claude-x", 1000, 5, 0.01, 1,
                         None, (span,), cache_read_tokens=900, cache_write_tokens=40,
                         why="fallback haiku for smart: overloaded right now")
    await store.append_turn(turn(session, "run-c", Message.user("hi"), trace=record))
    [back] = await store.traces(session.key)
    assert back == record


# -- summaries (the CompactingStore port) -----------------------------------------------


async def _numbered(store: Store, session: Session, count: int) -> None:
    for i in range(count):
        await store.append_turn(turn(session, f"run{i}", Message.user(f"u{i}"), Message.assistant(f"a{i}")))


async def test_a_summary_and_its_cut_hide_old_messages_but_keep_them(store: CompactingStore) -> None:
    session = await store.session("agent:main:test:dm:u1")
    await _numbered(store, session, 5)  # 10 messages
    live = await store.live_messages(session)
    assert [m.message.text for m in live] == [f"{r}{i}" for i in range(5) for r in "ua"]
    assert await store.live_count(session) == 10 and await store.summary(session) is None
    summary = Summary("they said hello", live[5].id, 6, 400, 120, "run-compact", 1700000000.0)
    assert await store.save_summary(session, summary) is True
    assert await store.summary(session) == summary
    assert [m.text for m in await store.history(session)] == ["u3", "a3", "u4", "a4"]
    assert [m.message.text for m in await store.live_messages(session)] == ["u3", "a3", "u4", "a4"]
    assert await store.live_count(session) == 4
    await _numbered(store, session, 1)
    assert [m.text for m in (await store.recent(session, 3)).messages] == ["a4", "u0", "a0"]
    assert await store.usage(session) == UsageTotals(turns=6)  # compaction deletes nothing


async def test_recent_reads_summary_last_messages_and_count_together(store: CompactingStore) -> None:
    session = await store.session("agent:main:test:dm:u1")
    assert await store.recent(session, 4) == Recent(None, [], 0)
    await _numbered(store, session, 5)  # 10 messages
    first = await store.recent(session, 3)
    assert [m.text for m in first.messages] == ["a3", "u4", "a4"] and first.live == 10 and first.summary is None
    live = await store.live_messages(session)
    summary = Summary("they said hello", live[5].id, 6, 400, 120, "run-compact", 1700000000.0)
    await store.save_summary(session, summary)
    after = await store.recent(session, 100)
    assert after == Recent(summary, await store.history(session), 4)


async def test_a_stale_summary_is_refused_and_changes_nothing(store: CompactingStore) -> None:
    session = await store.session("agent:main:test:dm:u1")
    await _numbered(store, session, 4)
    live = await store.live_messages(session)
    newer = Summary("newer", live[5].id, 6, 100, 10)
    assert await store.save_summary(session, newer)
    assert await store.save_summary(session, Summary("older", live[3].id, 4, 100, 10)) is False
    assert await store.save_summary(session, Summary("same", live[5].id, 6, 100, 10)) is False
    assert (await store.summary(session)).text == "newer"  # type: ignore[union-attr]
    assert await store.live_count(session) == 2


async def test_summaries_belong_to_their_session(store: CompactingStore) -> None:
    one = await store.session("agent:main:test:dm:u1")
    two = await store.session("agent:main:test:dm:u2")
    await _numbered(store, one, 2)
    await _numbered(store, two, 2)
    cut = (await store.live_messages(one))[-1].id
    assert await store.save_summary(one, Summary("one", cut, 4, 10, 1))
    assert await store.summary(two) is None
    assert len(await store.history(two)) == 4
    fresh = await store.session(one.key, fresh=True)
    assert await store.summary(fresh) is None


# -- pairing (the PairingStore port) ----------------------------------------------------

T0 = 1_700_000_000.0


async def test_pairing_request_issues_a_code_and_reuses_it(store: PairingStore) -> None:
    code = await store.pairing_request("telegram", "42", "Ada", now=T0)
    assert code is not None
    assert len(code.code) == 8 and not set(code.code) & set("0O1I")
    assert code == PairingCode(code.code, "telegram", "42", "Ada", T0, T0 + 3600)
    assert await store.pairing_request("telegram", "42", "Ada L.", now=T0 + 10) == code
    assert await store.pending_pairings(T0 + 10) == [code]


async def test_pairing_keeps_three_pending_per_platform_and_never_drops_a_waiting_code(store: PairingStore) -> None:
    codes = [await store.pairing_request("telegram", u, u, now=T0 + i) for i, u in enumerate("abc")]
    assert None not in codes and len({c.code for c in codes if c}) == 3
    assert await store.pairing_request("telegram", "b", "b", now=T0 + 5) == codes[1]  # the waiting keep theirs
    assert await store.pairing_request("slack", "d", "d", now=T0 + 5) is not None  # per platform
    assert await store.pairing_request("telegram", "d", "d", now=T0 + 6) is None  # full: d tries later
    pending = await store.pending_pairings(T0 + 6)
    assert [(c.platform, c.user_id) for c in pending] == [
        ("telegram", "a"), ("telegram", "b"), ("telegram", "c"), ("slack", "d"),
    ]
    assert await store.approve_pairing(codes[0].code, T0 + 7) == codes[0]  # type: ignore[union-attr]
    later = await store.pairing_request("telegram", "d", "d", now=T0 + 8)  # an approval made room
    assert later is not None and later.created_at == T0 + 8
    assert await store.pairing_request("telegram", "e", "e", now=T0 + 3600) is None  # b's is valid to its last second
    assert await store.pairing_request("telegram", "e", "e", now=T0 + 3601) is not None  # then it expired


async def test_pending_codes_are_capped_per_origin(store: PairingStore) -> None:
    one = [await store.pairing_request("telegram", u, u, now=T0, origin="telegram:bot1") for u in "abc"]
    assert None not in one
    assert await store.pairing_request("telegram", "d", "d", now=T0, origin="telegram:bot1") is None
    other = await store.pairing_request("telegram", "d", "d", now=T0, origin="telegram:bot2")
    assert other is not None  # another origin is not closed by the first one's strangers
    assert await store.pairing_request("telegram", "d", "d", now=T0 + 1, origin="telegram:bot1") == other  # theirs
    assert await store.pairing_request("telegram", "e", "e", now=T0) is not None  # the platform is an origin too
    assert len(await store.pending_pairings(T0)) == 5


async def test_pairing_codes_expire(store: PairingStore) -> None:
    old = await store.pairing_request("telegram", "42", "Ada", now=T0, ttl=60)
    full = [await store.pairing_request("telegram", u, u, now=T0, ttl=60) for u in "ab"]
    assert old is not None and None not in full
    assert await store.pending_pairings(T0 + 60) == []
    assert await store.approve_pairing(old.code, T0 + 60) is None
    new = await store.pairing_request("telegram", "42", "Ada", now=T0 + 60)  # expired ones leave room
    assert new is not None and new.code != old.code
    assert await store.pending_pairings(T0 + 60) == [new]


async def test_approving_is_case_insensitive_once_only_and_lets_the_sender_in(store: PairingStore) -> None:
    code = await store.pairing_request("telegram", "42", "Ada", now=T0)
    assert code is not None
    assert not await store.is_approved("telegram", "42")
    assert await store.approve_pairing("NOPE2345", T0) is None

    assert await store.approve_pairing(code.code.lower(), T0 + 5) == code
    assert await store.is_approved("telegram", "42")
    assert not await store.is_approved("discord", "42")
    assert await store.approve_pairing(code.code, T0 + 6) is None
    assert await store.pending_pairings(T0 + 6) == []
    assert await store.approved_senders() == [ApprovedSender("telegram", "42", "Ada", T0 + 5)]


async def test_revoking_an_approval(store: PairingStore) -> None:
    for platform, user, at in (("telegram", "42", T0), ("slack", "U1", T0 + 1), ("telegram", "7", T0 + 2)):
        code = await store.pairing_request(platform, user, f"name {user}", now=at)
        assert code is not None and await store.approve_pairing(code.code, at) is not None
    assert [s.user_id for s in await store.approved_senders()] == ["42", "U1", "7"]
    assert [s.user_id for s in await store.approved_senders("telegram")] == ["42", "7"]

    assert await store.revoke_sender("telegram", "42") is True
    assert await store.revoke_sender("telegram", "42") is False
    assert await store.revoke_sender("telegram", "nobody") is False
    assert not await store.is_approved("telegram", "42")
    assert [s.user_id for s in await store.approved_senders()] == ["U1", "7"]
    again = await store.pairing_request("telegram", "42", "Ada", now=T0 + 10)  # a fresh code after revoking
    assert again is not None and await store.approve_pairing(again.code, T0 + 10) is not None
    assert await store.is_approved("telegram", "42")


async def test_concurrent_pairing_requests_respect_the_limit(store: PairingStore) -> None:
    await asyncio.gather(*(store.pairing_request("telegram", str(u), "x", now=T0) for u in range(10)))
    assert len(await store.pending_pairings(T0)) == 3  # never more than the limit, whatever the interleaving


# -- what is owed to chats (the AnswerStore port) --------------------------------------------


def owed(answer_id: str, *inbound_ids: int | None, chunks: int = 2) -> Answer:
    parts = tuple(Chunk(f"part {i}") for i in range(chunks - 1)) + (Chunk("", "answer.md", b"\x00file"),)
    return Answer(answer_id, "telegram", Target("c1", ChatType.GROUP, "t9", "m1"), parts,
                  tuple(i for i in inbound_ids if i is not None), draft_id="77", created_at=1700000000.5)


async def test_an_answer_is_owed_until_its_last_chunk_is_sent(store: AnswerStore) -> None:
    m1 = await store.record_inbound(inbound("m1"), "k")  # type: ignore[attr-defined]
    answer = owed("run1", m1, chunks=3)
    await store.store_answer(answer)
    await store.store_answer(answer)  # storing it again changes nothing
    assert await store.undelivered() == [answer]
    assert await store.unanswered() == []  # type: ignore[attr-defined]  # owed: never run again

    await store.chunk_sent(answer, 0, "501")
    await store.chunk_sent(answer, 0, "999")  # a second record of a chunk changes nothing
    assert [a.sent for a in await store.undelivered()] == [1]
    await store.chunk_sent(answer, 1, None)  # some platforms give no id
    await store.chunk_sent(answer, 2, "503")
    assert await store.undelivered() == []
    assert await store.unanswered() == []  # type: ignore[attr-defined]


async def test_a_sent_chunk_is_found_by_its_platform_message_id_with_its_purpose(store: AnswerStore) -> None:
    answer = replace(owed("run1", chunks=3), target=Target("c1", ChatType.DM, purpose=Purpose.REMINDER))
    await store.store_answer(answer)
    assert await store.sent_as("telegram", "502") is None  # not sent yet
    await store.chunk_sent(answer, 0, "501")
    await store.chunk_sent(answer, 1, "502")
    found = await store.sent_as("telegram", "502")
    assert found is not None and found[1] == 1
    assert found[0].id == "run1" and found[0].chunks == answer.chunks and found[0].target.purpose is Purpose.REMINDER
    assert await store.sent_as("slack", "502") is None  # another platform's message of the same id
    (resumed,) = await store.undelivered()
    assert resumed.target == answer.target  # the purpose survives a restart


async def test_an_answer_stored_with_its_turn_and_given_up(store: Store) -> None:
    s = await store.session("k")
    m1 = await store.record_inbound(inbound("m1"), "k")
    answer = owed("run1", m1)
    await store.append_turn(turn(s, "run1", Message.user("hi"), Message.assistant("part 0"), inbound_ids=(m1,),
                                 answer=answer))
    assert await store.undelivered() == [answer]  # type: ignore[attr-defined]
    await store.give_up(answer)  # type: ignore[attr-defined]
    assert await store.undelivered() == [] and await store.unanswered() == []  # type: ignore[attr-defined]


async def test_refused_messages_keep_only_their_dedupe_key(store: Store) -> None:
    m1 = await store.record_inbound(inbound("m1", text="secret words"), "k")
    await store.forget_inbound(m1)  # type: ignore[arg-type]
    assert await store.unanswered() == []
    assert await store.record_inbound(inbound("m1"), "k") is None  # still deduped


async def test_context_messages_are_answered_and_pruned_after_their_retention(store: Store) -> None:
    context = await store.record_inbound(inbound("m1", text="chatter nobody addressed to the bot"), "k")
    run = await store.record_inbound(inbound("m2"), "k")
    await store.keep_as_context(context)  # type: ignore[arg-type]
    await store.mark_answered([run])  # type: ignore[list-item]
    assert await store.unanswered() == []
    assert await store.prune_context(0.0) == 0  # received after the cut: kept
    assert await store.record_inbound(inbound("m1"), "k") is None  # still deduped meanwhile
    assert await store.prune_context(time.time() + 1) == 1  # only the context row
    assert await store.record_inbound(inbound("m2"), "k") is None  # the answered one stays
    assert await store.prune_context(time.time() + 1) == 0


async def test_a_stored_message_gains_its_saved_files(store: Store) -> None:
    doc = Attachment(AttachmentKind.DOCUMENT, "a.pdf", "application/pdf", 3, platform_file_id="F1")
    m1 = await store.record_inbound(inbound("m1", attachments=(doc,)), "k")
    saved = inbound("m1", attachments=(replace(doc, path="inbox/a.pdf"),))
    await store.update_inbound(m1, saved)  # type: ignore[arg-type]
    [record] = await store.unanswered()
    assert record.message == saved


async def test_text_with_a_lone_surrogate_is_stored(store: Store) -> None:
    odd = inbound("m1", text="broken \ud83d emoji")
    assert await store.record_inbound(odd, "k") is not None
    [record] = await store.unanswered()
    assert record.message.text == odd.text


# -- media: voice modes, audio use, files by reference ----------------------------------


async def test_voice_modes_are_per_chat_and_audio_use_per_person(store: AppStore) -> None:
    from bot.media import ops  # the media capability's operations, on the one store

    assert await store.read(ops.voice_mode("telegram", "42")) is None
    await store.write(ops.set_voice_mode("telegram", "42", "auto"))
    await store.write(ops.set_voice_mode("telegram", "42", "on"))
    await store.write(ops.set_voice_mode("slack", "42", "off"))
    assert (await store.read(ops.voice_mode("telegram", "42")), await store.read(ops.voice_mode("slack", "42"))) == \
        ("on", "off")
    await store.write(ops.record_audio("telegram:42", 12.5, at=1000.0))
    await store.write(ops.record_audio("telegram:42", 3.0, at=2000.0))
    await store.write(ops.record_audio("telegram:7", 60.0, at=2000.0))
    assert await store.read(ops.audio_since("telegram:42", 1500.0)) == 3.0
    assert await store.read(ops.audio_since("telegram:42", 0.0)) == 15.5
    assert await store.read(ops.audio_since("nobody", 0.0)) == 0.0


async def test_a_file_chunk_by_reference_round_trips_and_its_answer_has_a_state(store: AnswerStore) -> None:
    ref = FileRef("/ws/telegram-42", "out/report.csv", 25, "ab" * 32)
    answer = Answer("file-1", "telegram", Target("42"), (Chunk("caption", "report.csv", file_ref=ref),
                                                         Chunk("", "answer.ogg", b"OggS", voice=True)))
    assert await store.answer_state("file-1") is None
    await store.store_answer(answer)
    assert await store.undelivered() == [answer] and await store.answer_state("file-1") == "owed"
    await store.chunk_sent(answer, 0, "m1")
    await store.chunk_sent(answer, 1, "m2")
    assert await store.answer_state("file-1") == "delivered"
    await store.store_answer(replace(answer, id="file-2"))
    await store.give_up(replace(answer, id="file-2"))
    assert await store.answer_state("file-2") == "given_up"


# -- schedules (the ScheduleStore port) ------------------------------------------------------


class TurnsAndAnswers(Store, AnswerStore, Protocol):
    """The store beside the schedules' port: the turns and answers that close occurrences."""


@pytest.fixture
def sched(store: Store) -> ScheduleStore:
    """The schedules' port on the store under test (``bot.schedules.store``: its operations, run by the store)."""
    return StoredSchedules(cast("AppStore", store))


DM_42 = Conversation.of_key("agent:main:telegram:dm:42", account="bot1")
GROUP = Conversation.of_key("agent:main:telegram:group:-100", account="bot1")


def job(text: str = "stretch", *, at: int = 2000, kind: JobKind = JobKind.REMINDER, creator: str = "42",
        conversation: Conversation = DM_42, when: When | None = None, next_at: int | None = None) -> Job:
    rule = when or When(RuleKind.AT, "Europe/Berlin", at)
    return Job(0, kind, text, rule, conversation, creator, "Ada", next_at=next_at if next_at is not None else at,
               check='{"command": "test -s todo.txt"}' if kind is JobKind.TASK else None, prompt="minimal")


async def test_a_job_round_trips_with_its_conversation(sched: ScheduleStore) -> None:
    every = When(RuleKind.EVERY, "America/New_York", 1000, 3600)
    added = await sched.add_job(job("summarise", kind=JobKind.TASK, when=every, next_at=1000,
                                    conversation=replace(GROUP, thread_id="t9")), max_per_person=5)
    assert added is not None and added.id > 0
    assert added.kind is JobKind.TASK and added.when == every and added.next_at == 1000
    assert added.conversation == replace(GROUP, thread_id="t9") and added.conversation.session_key == GROUP.session_key
    assert added.creator == "42" and added.creator_name == "Ada" and added.person == "telegram:42"
    assert added.prompt == "minimal" and added.check == '{"command": "test -s todo.txt"}'
    assert await sched.job(added.id) == added and await sched.job(added.id + 100) is None


async def test_a_person_has_at_most_their_cap_of_open_jobs(sched: ScheduleStore) -> None:
    first = await sched.add_job(job("a"), max_per_person=2)
    assert await sched.add_job(job("b"), max_per_person=2) is not None
    assert await sched.add_job(job("c"), max_per_person=2) is None  # the cap: nothing stored
    assert await sched.add_job(job("d", creator="7"), max_per_person=2) is not None  # someone else
    assert first is not None
    assert await sched.update_job(first.id, expect=(JobState.ACTIVE,), state=JobState.CANCELLED)
    assert await sched.add_job(job("c"), max_per_person=2) is not None  # a cancelled job frees its place
    assert [j.text for j in await sched.jobs(person="telegram:42")] == ["b", "c"]
    assert [j.text for j in await sched.jobs(states=(JobState.CANCELLED,))] == ["a"]
    assert [j.text for j in await sched.jobs(platform="telegram", chat_id="42", person="telegram:7")] == ["d"]


async def test_the_due_jobs_and_the_next_instant(sched: ScheduleStore) -> None:
    assert await sched.next_due() is None
    for at in (3000, 1000, 2000):
        await sched.add_job(job(str(at), at=at), max_per_person=10)
    paused = await sched.add_job(job("paused", at=500), max_per_person=10)
    assert paused is not None
    await sched.update_job(paused.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED, next_at=500)
    assert await sched.next_due() == 1000
    assert [j.text for j in await sched.due(2000, 10)] == ["1000", "2000"]
    assert [j.text for j in await sched.due(5000, 1)] == ["1000"]


async def test_an_occurrence_is_claimed_once(sched: ScheduleStore) -> None:
    added = await sched.add_job(job(kind=JobKind.TASK, when=When(RuleKind.EVERY, "UTC", 1000, 600), next_at=1000),
                                max_per_person=5)
    assert added is not None
    claim = Claim(added.id, 1000, 1600)
    assert await sched.claim([claim, claim]) == [True, False]  # the second claimer loses, in one batch too
    assert await sched.claim([claim]) == [False]  # and later
    assert await sched.claim([Claim(added.id, 1200, 1800)]) == [False]  # not the instant the job points at
    moved = await sched.job(added.id)
    assert moved is not None and moved.next_at == 1600 and moved.state is JobState.ACTIVE
    [running] = await sched.unclosed()
    assert (running.job.id, running.at, running.late) == (added.id, 1000, 0)
    assert await sched.close_occurrence(Closing(added.id, 1000, "failed")) == 1
    assert await sched.close_occurrence(Closing(added.id, 1000, "completed")) is None  # closed once
    assert await sched.unclosed() == []


async def test_a_one_shot_claimed_is_done_and_a_reminder_owes_its_answer_in_the_claim(
        store: TurnsAndAnswers, sched: ScheduleStore) -> None:
    added = await sched.add_job(job(at=1000), max_per_person=5)
    assert added is not None
    answer = owed(f"job-{added.id}-1000", chunks=1)
    assert await sched.claim([Claim(added.id, 1000, None, late=90, answer=answer)]) == [True]
    done = await sched.job(added.id)
    assert done is not None and done.state is JobState.DONE and done.next_at is None
    assert await store.undelivered() == [answer]
    assert await sched.unclosed() == []  # a reminder's occurrence is over once its answer is owed
    assert await sched.next_due() is None and await sched.jobs() == []


async def test_a_lost_claim_stores_no_answer(store: TurnsAndAnswers, sched: ScheduleStore) -> None:
    added = await sched.add_job(job(at=1000), max_per_person=5)
    assert added is not None
    await sched.update_job(added.id, expect=(JobState.ACTIVE,), state=JobState.CANCELLED)
    assert await sched.claim([Claim(added.id, 1000, None, answer=owed("late", chunks=1))]) == [False]
    assert await store.undelivered() == []


async def test_failures_in_a_row_count_until_a_success(sched: ScheduleStore) -> None:
    added = await sched.add_job(job(kind=JobKind.TASK, when=When(RuleKind.EVERY, "UTC", 100, 100), next_at=100),
                                max_per_person=5)
    assert added is not None
    outcomes = ["failed", "failed", "busy", "failed", "completed", "failed", "skipped", "failed"]
    seen = []
    for i, outcome in enumerate(outcomes):
        at = 100 * (i + 1)
        assert await sched.claim([Claim(added.id, at, at + 100)]) == [True]
        seen.append(await sched.close_occurrence(Closing(added.id, at, outcome)))
    assert seen == [1, 2, 2, 3, 0, 1, 0, 1]
    await sched.update_job(added.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED, next_at=None, reason="why")
    paused = await sched.job(added.id)
    assert paused is not None and (paused.state, paused.failures, paused.reason) == (JobState.PAUSED, 1, "why")
    assert await sched.update_job(added.id, expect=(JobState.PAUSED,), state=JobState.ACTIVE, next_at=5000)
    resumed = await sched.job(added.id)
    assert resumed is not None and (resumed.failures, resumed.next_at, resumed.reason) == (0, 5000, "")


async def test_a_tasks_turn_closes_its_occurrence_in_its_transaction(store: TurnsAndAnswers,
                                                                     sched: ScheduleStore) -> None:
    added = await sched.add_job(job(kind=JobKind.TASK, at=1000), max_per_person=5)
    assert added is not None
    assert await sched.claim([Claim(added.id, 1000, None)]) == [True]
    s = await store.session(DM_42)
    answer = owed("run-task", chunks=1)
    await store.append_turn(turn(s, "run-task", Message.user("summarise"), Message.assistant("done"),
                                 answer=answer, also=(partial(Closes(added.id, 1000), "failed"),)))
    assert await sched.unclosed() == [] and await store.undelivered() == [answer]
    after = await sched.job(added.id)
    assert after is not None and after.failures == 1
    assert await sched.close_occurrence(Closing(added.id, 1000, "failed")) is None  # never counted twice


async def test_an_update_with_its_answer_is_one_step(store: TurnsAndAnswers, sched: ScheduleStore) -> None:
    added = await sched.add_job(job(), max_per_person=5)
    assert added is not None
    told = owed("paused-1", chunks=1)
    assert await sched.update_job(added.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED, answer=told)
    assert not await sched.update_job(added.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED,
                                      answer=owed("paused-2", chunks=1))
    assert [a.id for a in await store.undelivered()] == ["paused-1"]


async def test_a_persons_zone(sched: ScheduleStore) -> None:
    assert await sched.zone("telegram:42") is None
    await sched.set_zone("telegram:42", "Europe/Berlin")
    await sched.set_zone("telegram:42", "America/New_York")
    assert await sched.zone("telegram:42") == "America/New_York"
    await sched.set_zone("telegram:42", None)
    assert await sched.zone("telegram:42") is None


# -- the dashboard's reads and audit trail (Reads) and denying a pairing code ----------------


async def test_deny_pairing_drops_the_code_and_the_sender_may_ask_again(store: PairingStore) -> None:
    code = await store.pairing_request("telegram", "42", "Ada", now=T0)
    assert code is not None
    assert await store.deny_pairing(code.code.lower(), T0 + 1) == code
    assert await store.pending_pairings(T0 + 1) == [] and not await store.is_approved("telegram", "42")
    assert await store.deny_pairing(code.code, T0 + 2) is None  # gone
    again = await store.pairing_request("telegram", "42", "Ada", now=T0 + 3)
    assert again is not None and again.code != code.code
    assert await store.approve_pairing(again.code, T0 + 4) == again
    assert await store.deny_pairing(again.code, T0 + 5) is None  # used: a denial cannot undo an approval
    assert await store.is_approved("telegram", "42")


def _browse(store: Store) -> Reads:
    """The dashboard's reads and audit trail, run on every implementation (``Reads``)."""
    from bot.dashboard.reads import Reads

    return Reads(cast("AppStore", store))


async def _conversation(store: Store, key: str, user: str, name: str, text: str, answer: str, *, run: str,
                        message_id: str, cost: float = 0.01) -> Session:
    msg = InboundMessage("telegram", "bot1", user, ChatType.DM, Sender(user, name), text, message_id)
    await store.record_inbound(msg, key)
    session = await store.session(key)
    await store.append_turn(turn(session, run, Message.user(text), Message.assistant(answer),
                                 usage=Usage(100, 20), cost=cost))
    return session


async def test_sessions_are_listed_newest_first_and_found_by_person_key_or_text(store: Store) -> None:
    b = _browse(store)
    ada = await _conversation(store, "agent:main:telegram:dm:1", "1", "Ada Lovelace", "compute Bernoulli numbers",
                              "Here they are", run="r1", message_id="m1")
    await asyncio.sleep(0.01)
    bob = await _conversation(store, "agent:main:telegram:dm:2", "2", "Bob", "100% of the_budget?", "Yes",
                              run="r2", message_id="m2", cost=0.02)
    await store.session("agent:main:telegram:dm:2:sub:1")  # a sub-agent's: never listed
    listed = await b.sessions()
    assert [s.id for s in listed] == [bob.id, ada.id]
    first = listed[1]
    assert (first.key, first.title, first.sender, first.turns, first.input_tokens, first.output_tokens) == (
        "agent:main:telegram:dm:1", "compute Bernoulli numbers", "Ada Lovelace", 1, 100, 20)
    assert first.cost == pytest.approx(0.01) and not first.archived
    assert [s.id for s in await b.sessions("lovelace")] == [ada.id]  # the sender's name
    assert [s.id for s in await b.sessions("bernoulli")] == [ada.id]  # a message's text
    assert [s.id for s in await b.sessions("telegram:dm:2")] == [bob.id]  # the key
    assert [s.id for s in await b.sessions("100%")] == [bob.id]  # LIKE's wildcards are literal
    assert [s.id for s in await b.sessions("_budget")] == [bob.id]
    assert await b.sessions("%x%") == [] and await b.sessions("nothing like it") == []
    assert len(await b.sessions(limit=1)) == 1


async def test_a_session_waiting_for_its_first_turn_is_titled_by_its_message(store: Store) -> None:
    msg = InboundMessage("telegram", "bot1", "3", ChatType.DM, Sender("3", "Cy"), "first words", "m9")
    await store.record_inbound(msg, "agent:main:telegram:dm:3")
    await store.session("agent:main:telegram:dm:3")
    (listed,) = await _browse(store).sessions()
    assert (listed.title, listed.sender, listed.turns) == ("first words", "Cy", 0)


async def test_a_session_log_has_its_messages_compacted_ones_marked_and_its_summaries(store: Store) -> None:
    b = _browse(store)
    session = await _conversation(store, "agent:main:telegram:dm:1", "1", "Ada", "one", "two", run="r1",
                                  message_id="m1")
    await store.append_turn(turn(session, "r2", Message.user("three"),
                                 Message(Role.ASSISTANT, (ToolCall("c1", "read_file", '{"path": "a"}'),)),
                                 Message(Role.TOOL, (ToolResult("c1", "content of a"),)), Message.assistant("four")))
    live = await store.live_messages(session)  # type: ignore[attr-defined]
    summary = Summary("one and two", live[1].id, 2, 50, 10, "compact-1", T0)
    assert await store.save_summary(session, summary)  # type: ignore[attr-defined]
    log = await b.session_log(session.id)
    assert log is not None and log.session.key == session.key and log.earlier == 0
    assert [(m.run_id, m.message.text, m.compacted) for m in log.messages] == [
        ("r1", "one", True), ("r1", "two", True), ("r2", "three", False), ("r2", "", False), ("r2", "", False),
        ("r2", "four", False)]
    assert log.messages[3].message.tool_calls[0].name == "read_file"
    assert [(s.text, s.through_id) for s in log.summaries] == [("one and two", live[1].id)]
    short = await b.session_log(session.id, limit=2)
    assert short is not None and short.earlier == 4 and [m.message.text for m in short.messages] == ["", "four"]
    assert await b.session_log(session.id + 1000) is None


async def test_one_trace_is_read_by_its_run_id(store: Store) -> None:
    from bot.tracing import Span, SpanKind, TraceRecord

    session = await store.session("agent:main:telegram:dm:1")
    record = TraceRecord("run-t", session.key, "main", 100.0, 102.0, "failed", "gpt-x", 10, 2, 0.5, 1, "boom",
                         spans=(Span(SpanKind.LLM, "gpt-x", 100.1, 900.0, 10, 2, 0.5),))
    await store.append_turn(turn(session, "run-t", Message.user("hi"), trace=record))
    b = _browse(store)
    assert await b.trace("run-t") == record
    assert await b.trace("run-none") is None


async def test_daily_usage_per_person_and_their_names(store: Store) -> None:
    from bot.store.base import Charge

    b = _browse(store)
    session = await _conversation(store, "agent:main:telegram:dm:1", "1", "Ada", "hi", "hello", run="r1",
                                  message_id="m1")
    await store.append_turn(turn(session, "r2", Message.user("more"), charges=(Charge("telegram:1", 70, 0.5),
                                                                                Charge("slack:U9", 30, 0.25))))
    now = time.time()
    start = now - 86400 * 2
    report = await b.daily_usage(start)
    assert {(d.person, d.tokens, d.cost) for d in report.days} == {("telegram:1", 70, 0.5), ("slack:U9", 30, 0.25)}
    (day,) = {d.day for d in report.days}
    assert start + 86400 * 2 <= day + 86400 and day <= now  # the day the charges fell on
    assert report.names["telegram:1"] == "Ada" and "slack:U9" not in report.names
    assert (await b.daily_usage(now + 10)).days == []
    assert await store.bot_usage_since(start) == (100, 0.75)  # the whole bot: everyone's charges
    assert await store.bot_usage_since(now + 10) == (0, 0.0)


async def test_failures_are_failed_runs_and_given_up_answers_newest_first(store: Store) -> None:
    from bot.tracing import TraceRecord

    session = await store.session("agent:main:telegram:dm:1")
    for run_id, status, ended in (("ok", "completed", 10.0), ("bad", "failed", 20.0)):
        await store.append_turn(turn(session, run_id, Message.user("x"), trace=TraceRecord(
            run_id, session.key, "main", ended - 1, ended, status, "m", error="it broke" if status == "failed"
            else None)))
    answer = Answer("a1", "telegram", Target("c9"), (Chunk("one"), Chunk("two")))
    await store.store_answer(answer)  # type: ignore[attr-defined]
    await store.chunk_sent(answer, 0, "1")  # type: ignore[attr-defined]
    await store.give_up(answer)  # type: ignore[attr-defined]
    found = await _browse(store).failures()
    assert [(f.kind, f.where, f.run_id) for f in found] == [("delivery", "telegram:c9", ""),
                                                             ("run", session.key, "bad")]
    assert found[0].detail == "answer a1 given up with 1 part unsent" and found[1].detail == "it broke"
    assert len(await _browse(store).failures(limit=1)) == 1


async def test_dashboard_actions_are_recorded_newest_first(store: Store) -> None:
    from bot.store.reports import AuditEntry

    b = _browse(store)
    entries = [AuditEntry(T0 + i, "olive", "operator", action, f"target-{i}", "done", "127.0.0.1")
               for i, action in enumerate(("login", "stop", "approve"))]
    for entry in entries:
        await b.record_action(entry)
    assert await b.actions() == entries[::-1]
    assert await b.actions(limit=1) == [entries[-1]]


# -- model choice and titles (ModelStore) -----------------------------------------------


async def test_a_conversations_model_outlives_a_fresh_session_and_can_be_forgotten(store: Store) -> None:
    models: ModelStore = store  # type: ignore[assignment]
    key = "agent:main:telegram:dm:42"
    assert await models.chosen_model(key) is None
    await models.choose_model(key, ModelChoice("fast", "telegram:42", 10.0))
    await models.choose_model(key, ModelChoice("smart", "telegram:7", 11.0))
    await store.session(key, fresh=True)  # /new
    assert await models.chosen_model(key) == ModelChoice("smart", "telegram:7", 11.0)
    assert await models.chosen_model("agent:main:telegram:dm:43") is None
    await models.choose_model(key, None)
    assert await models.chosen_model(key) is None


async def test_a_sessions_first_title_stays_and_sessions_are_listed(store: Store) -> None:
    models: ModelStore = store  # type: ignore[assignment]
    first = await store.session("agent:main:telegram:dm:1")
    second = await store.session("agent:main:telegram:dm:2")
    await store.session("agent:main:telegram:dm:2:sub:1")  # a sub-agent's: not listed
    assert await models.title(first) is None
    assert await models.set_title(first, "Trip to Lisbon", "gpt-x")
    assert not await models.set_title(first, "Another", "gpt-x")
    assert await models.title(first) == "Trip to Lisbon"
    await store.append_turn(Turn(second, "r1", (Message.user("hi"),)))
    await models.choose_model(second.key, ModelChoice("smart", "telegram:2", 1.0))
    listed = await models.titled_sessions()
    assert [(s.key, s.title, s.model) for s in listed] == [
        (second.key, None, "smart"), (first.key, "Trip to Lisbon", None)]  # the last used first
    assert listed[0].last_at is not None and listed[1].last_at is None
    fresh = await store.session(first.key, fresh=True)
    assert [s.id for s in await models.titled_sessions()] == [fresh.id, second.id]
    assert {s.id for s in await models.titled_sessions(archived=True)} == {first.id, second.id, fresh.id}
    assert len(await models.titled_sessions(last=1)) == 1


# -- what was told once (NoteStore) ------------------------------------------------------


async def test_a_note_is_told_once_for_good_or_once_per_window(store: Store) -> None:
    notes: NoteStore = store  # type: ignore[assignment]
    key = "agent:main:telegram:dm:42"
    assert await notes.first_note(key, "fallback:backup", None, 10.0)
    assert not await notes.first_note(key, "fallback:backup", None, 1e12)  # for good
    assert await notes.first_note(key, "fallback:other", None, 10.0)  # another note
    assert await notes.first_note("telegram:42", "limit:rate", 70.0, 10.0)
    assert not await notes.first_note("telegram:42", "limit:rate", 80.0, 20.0)  # still in its window
    assert await notes.first_note("telegram:42", "limit:rate", 140.0, 70.0)  # the window is over: told again
    assert not await notes.first_note("telegram:42", "limit:rate", 150.0, 90.0)
    assert await notes.first_note("telegram:7", "limit:rate", 70.0, 10.0)  # another person


async def test_of_many_claiming_a_note_at_once_one_tells_it(store: Store) -> None:
    notes: NoteStore = store  # type: ignore[assignment]
    told = await asyncio.gather(*(notes.first_note("telegram:42", "limit:cost", 86400.0, 5.0) for _ in range(8)))
    assert sum(told) == 1
