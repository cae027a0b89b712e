"""A channel of the port whose chats are HTTP exchanges: the API's (and, extended, the web chat's).

The turn runner answers a conversation of platform ``api`` as it answers any chat: progress
streams the text into the channel's native stream (``stream``: each ``append`` is a delta),
delivery sends the stored answer (``send``), ``send_file`` sends a file, and the run's end is
on the event bus. Each chat (a session's thread) has watchers: the requests waiting on it;
what the channel is given for a chat goes to each of its watchers as ``Item``s, in order,
and to nobody when no one watches (delivery counts it delivered: the turn is stored, the
client that went away reads it in the session's history, or never).

``start`` settles what a previous process left unanswered here: a request's client is gone
with that process, so nothing is run again for it (the intake would otherwise take it up
with the rights of a local user).

Its senders are people (``OfPeople``): a message of theirs belongs to their session ``chat``,
and they are owners when one of their accounts is. It ``Asks``: a question (an approval's
card) is kept while open, with the person of its chat, and told to the ``listeners`` (the web
chat shows an API run's question as buttons to whoever may answer it); the API's client gets
it as text that says how to answer it. With ``keep``, each chat's last items are kept,
numbered, so that a watcher that comes back gets what it missed (``since``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.agent.events import EventKind, RunEvent
from bot.channels import PLAIN, Choice, Dialect, Inbox, MessageShape, SendFailed, Status
from bot.config.types import Streaming
from bot.messages import Attachment, InboundMessage, Target
from bot.tools.approval import parse_choice

if TYPE_CHECKING:
    from bot.api.people import Directory
    from bot.conversation import Conversation

log = logging.getLogger(__name__)

SHAPE = MessageShape(chunk=1_000_000, max_chunks=1_000, edit_every=0.0, status_every=3600.0,
                     max_upload=20 * 1024 * 1024)
ENDS = {EventKind.COMPLETED: "completed", EventKind.FAILED: "failed", EventKind.CANCELLED: "cancelled"}
KEPT_CHATS = 64  # chats whose last items are kept (keep > 0), the least recently told dropped first
TYPED = {"o": "{approve} {id} (once)", "s": "{approve} {id} session", "a": "{approve} {id} always", "d": "{deny} {id}"}


@dataclass(frozen=True, slots=True)
class Item:
    """One thing for a chat: ``delta`` (streamed text), ``say`` (a message), ``file``, ``ask`` (a
    question with buttons), ``closed`` (a question decided), ``end`` (the run ended: ``text`` is
    its final answer or failure, ``usage`` its tokens in and out); the web chat's pages also get
    ``user`` (the person's own message), ``note`` and ``threads`` (their conversations, as
    ``choices``: thread, title)."""

    kind: str
    text: str = ""
    name: str = ""
    data: bytes = b""
    ref: str = ""  # the message's id (ask, closed, say)
    choices: tuple[tuple[str, str], ...] = ()  # (id, label)
    usage: tuple[int, int] = (0, 0)
    outcome: str = ""  # end: completed, failed, cancelled
    id: int = 0  # its number, once told (in the order told, across chats)
    lid: int = 0  # the web chat's log row it is (say, user), 0 for none
    nonce: str = ""  # user: the page's own mark of a message it sent


@dataclass(frozen=True, slots=True)
class Question:
    """A question with buttons, open in ``chat``, whose ``person`` is the one that chat acts for."""

    ref: str
    chat: str
    person: str
    text: str
    choices: tuple[tuple[str, str], ...]

    @property
    def approval(self) -> str:
        found = next((parse_choice(c) for c, _ in self.choices if parse_choice(c)), None)
        return found[0] if found else ""


class Watch:
    """One request's (or page's) view of a chat: ``who`` is the person it is for."""

    def __init__(self, who: str = "") -> None:
        self.who = who
        self.items: asyncio.Queue[Item] = asyncio.Queue()


class _Live:
    def __init__(self, channel: ExchangeChannel, chat: str) -> None:
        self._channel, self._chat = channel, chat

    async def append(self, text: str) -> None:
        self._channel.tell(self._chat, Item("delta", text))

    async def close(self) -> str | None:
        return None  # the stored answer is sent as a message of its own


class ExchangeChannel:
    """The port's ``Channel`` (and ``Streams``) for chats that are HTTP requests."""

    streaming: Streaming = "native"

    def __init__(self, name: str, *, dialect: Dialect = PLAIN, shape: MessageShape = SHAPE,
                 settle: Callable[[str], Awaitable[None]] | None = None, people: Directory | None = None,
                 keep: int = 0) -> None:
        self.name, self.dialect, self.shape = name, dialect, shape
        self._settle, self._people, self._keep = settle, people, keep
        self._watchers: dict[str, list[Watch]] = {}
        self._ids = itertools.count(1)
        self._told = itertools.count(1)
        self.epoch = secrets.token_hex(4)  # this process's numbering: a number from another is unknown here
        self._kept: OrderedDict[str, deque[Item]] = OrderedDict()
        self._cut: dict[str, int] = {}  # chat -> the last number dropped from what it keeps
        self._forgot = 0  # the last number of a chat no longer kept at all
        self.last = 0  # the number of the last item told
        self.questions: dict[str, Question] = {}  # ref -> a question open now
        self.listeners: list[Callable[[str, Question, str], None]] = []  # (ask|closed|note, question, note's text)
        self._stopped = asyncio.Event()
        self.inbox: Inbox | None = None

    # -- its people (OfPeople) -----------------------------------------------------------

    def conversation_of(self, msg: InboundMessage) -> Conversation | None:
        return self._people.conversation_of(self.name, msg) if self._people is not None else None

    def is_owner(self, user_id: str) -> bool:
        return self._people is not None and self._people.is_owner(user_id)

    def limit_key(self, user_id: str) -> str:
        person = self._people.person(user_id) if self._people is not None else None
        return person.limit_key if person is not None else f"{self.name}:{user_id}"

    # -- watching ------------------------------------------------------------------------

    def watch(self, chat: str, watch: Watch | None = None) -> Watch:
        watch = watch if watch is not None else Watch()
        self._watchers.setdefault(chat, []).append(watch)
        return watch

    def unwatch(self, chat: str, watch: Watch) -> None:
        watchers = self._watchers.get(chat, [])
        if watch in watchers:
            watchers.remove(watch)
        if not watchers:
            self._watchers.pop(chat, None)

    def tell(self, chat: str, item: Item) -> None:
        item = replace(item, id=next(self._told))
        self.last = item.id
        if self._keep:
            kept = self._kept.setdefault(chat, deque())
            self._kept.move_to_end(chat)
            kept.append(item)
            if len(kept) > self._keep:
                self._cut[chat] = kept.popleft().id
            while len(self._kept) > KEPT_CHATS:
                gone, items = self._kept.popitem(last=False)
                self._cut.pop(gone, None)
                self._forgot = max(self._forgot, items[-1].id)
        for watch in self._watchers.get(chat, ()):
            watch.items.put_nowait(item)

    def since(self, chat: str, after: int) -> list[Item] | None:
        """What ``chat`` was told after number ``after``; None when some of it is not kept any more."""
        if chat not in self._kept:
            return [] if after >= self._forgot else None
        if self._cut.get(chat, 0) > after:
            return None
        return [item for item in self._kept[chat] if item.id > after]

    def on_event(self, event: RunEvent) -> None:
        """The event bus's inline subscriber: a run of one of these chats ended."""
        conversation = event.conversation
        if conversation.platform != self.name or conversation.key.subs or event.kind not in ENDS:
            return
        usage = (event.usage.input_tokens, event.usage.output_tokens) if event.usage is not None else (0, 0)
        self.tell(conversation.chat_id, Item("end", event.text, usage=usage, outcome=ENDS[event.kind]))

    def next_id(self) -> str:
        return f"{self.name}-{next(self._ids)}"

    # -- the port ------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self.inbox = inbox
        if self._settle is not None:
            await self._settle(self.name)

    async def stop(self) -> None:
        self._stopped.set()

    async def wait_closed(self) -> None:
        await self._stopped.wait()

    async def send(self, to: Target, text: str) -> str:
        ref = self.next_id()
        self.tell(to.chat_id, Item("say", text, ref=ref))
        return ref

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        self.tell(to.chat_id, Item("edit", text, ref=message_id))

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        ref = self.next_id()
        self.tell(to.chat_id, Item("file", caption, name=name, data=data, ref=ref))
        return ref

    async def status(self, to: Target, status: Status) -> None:
        return None

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        if attachment.data is None:
            raise SendFailed("this file is not here any more", permanent=True)
        if len(attachment.data) > limit:
            raise SendFailed(f"“{attachment.name}” is too big", permanent=True)
        return attachment.data

    async def stream(self, to: Target) -> _Live:
        return _Live(self, to.chat_id)

    # -- questions (Asks) ----------------------------------------------------------------

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        ref = self.next_id()
        who = next((w.who for w in self._watchers.get(to.chat_id, ()) if w.who), "")
        question = Question(ref, to.chat_id, who, text, tuple((c.id, c.label) for c in choices))
        self.questions[ref] = question
        self.tell(to.chat_id, Item("ask", self.asked(question), ref=ref, choices=question.choices))
        self._heard("ask", question)
        return ref

    def asked(self, question: Question) -> str:
        """The question as the chat's watchers get it: the API's client cannot press, so it reads
        how to answer by typing (from a DM of theirs) or where to press (the web chat)."""
        typed = [TYPED[c[-1]].format(approve="/approve", deny="/deny", id=question.approval)
                 for c, _ in question.choices if question.approval and c[-1] in TYPED]
        if not typed:
            return question.text
        return (f"{question.text}\nAnswer in the web chat, or from a DM of yours: "
                f"{', '.join(typed[:-1])} or {typed[-1]}.")

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        question = self.questions.get(press.reply_to or "")
        if text and question is not None:
            self._heard("note", replace(question, person=press.sender.id), text)

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        question = self.questions.pop(question_id, None)
        self.tell(to.chat_id, Item("closed", text, ref=question_id))
        if question is not None:
            self._heard("closed", replace(question, text=text))

    def _heard(self, kind: str, question: Question, note: str = "") -> None:
        for listener in self.listeners:
            listener(kind, question, note)
