"""What only some channels can do, each a small Protocol of its own (STYLE habit 21).

A capability is checked once, with ``isinstance``, where the channel is wired (progress
takes a channel's ``Streams`` and ``Notes`` when it is made; the command line takes the
terminal's ``Interrupts``), never looked up by name where it is used. A channel offers one
by having the method: there is nothing to register.

- ``Streams``: the platform's own streaming message (Slack's chat.startStream, the
  terminal printing deltas), used by progress when the channel's ``streaming`` is ``native``.
- ``Notes``: a line about a run's activity (a tool call, a retry): the terminal.
- ``Asks``: a question with buttons, pressed later (approvals).
- ``Interrupts``: Ctrl-C in the terminal stops the running answer.
- ``SpellsCommands``: a platform where a command is typed otherwise than ``/name`` (Slack
  keeps ``/status`` and ``/help`` for itself: there they are ``/chatgate status``).
- ``SendsVoice``: a voice note the platform plays inline (Telegram's voice bubble); elsewhere
  a voice answer goes as an audio file (``send_file``).
- ``SendsPhoto``: a picture shown as a photo with its caption where ``send_file`` would send it
  as a document (Telegram's sendPhoto); elsewhere a picture goes through ``send_file``.
- ``Named``: what the bot is called there, so that a spoken message can address it by name.
- ``Windowed``: a platform that takes a message the bot starts on its own only for a while
  after the person last wrote (WhatsApp's 24 hours), so that a scheduled job says so when made.
- ``Connects``: whether the platform answers now (the ops capability's ``/readyz``); a
  channel without it counts as connected once started.
- ``RecallsInbound``: a channel that asks the store when a chat's person last wrote (that
  window, after a restart or when another instance heard them).
- ``ReportsUndelivered``: a platform that says later that a message it took was not delivered
  (WhatsApp's ``failed`` status): delivery's ledger owes its chunk again, or gives it up.
- ``OfPeople``: senders who are the bot's people, not accounts (the API, the web chat).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bot.conversation import Conversation
from bot.messages import InboundMessage, Target


class LiveDraft(Protocol):
    """A platform's own streaming message, for one answer."""

    async def append(self, text: str) -> None:
        """Add ``text`` (Markdown, as the model wrote it) to what the message shows."""

    async def close(self) -> str | None:
        """End the stream; the id of the message it became (the answer's first chunk edits it)."""


@runtime_checkable
class Streams(Protocol):
    async def stream(self, to: Target) -> LiveDraft | None:
        """A native streaming message for an answer to ``to``; None where the platform has none
        for that place (Slack streams only in threads): progress then edits a draft instead."""


@runtime_checkable
class Notes(Protocol):
    async def note(self, to: Target, text: str) -> None:
        """Show one plain line about the run's activity (``⚙ read_file …``) between its text."""


@dataclass(frozen=True, slots=True)
class Choice:
    """One button of a question: ``id`` comes back when it is pressed, ``label`` is shown, ``key``
    is its one-letter shortcut where a question is answered by typing (the terminal's y/n)."""

    id: str  # at most 64 bytes of ASCII (Telegram's callback_data is the smallest room)
    label: str
    key: str = ""


@runtime_checkable
class Asks(Protocol):
    """Questions with buttons (approvals). A channel without it gets the question as text with
    typed answers (``/approve <id>``), which the core sends itself."""

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        """Show ``text`` (already rendered in the channel's dialect, as ``send`` takes it, and
        fitting one message) with one button per choice; the platform's id of that message.
        Raises ``ValueError`` for a choice id the platform cannot carry, ``SendFailed`` like ``send``.

        A press is not an answer to this call (it may come hours later, after a restart, on a
        button sent by an earlier process): it comes back through the channel's ``Inbox`` as an
        ``InboundMessage`` from the person who pressed, in the chat and thread of the question,
        with ``reply_to`` the id this call returned, ``text`` the pressed choice's ``id``,
        ``addressed`` true, and a ``message_id`` of the press's own (a redelivered press is
        deduped like a message). The core decides what a press means and who may press, and
        then calls ``answer_press`` once for it. The channel meets its platform's deadline for
        acknowledging the press by itself (Slack's 3 s, Discord's 3 s, Telegram's spinner)."""

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        """The core's answer to a press, once: nothing to say (``None``), or a short sentence for
        the person who pressed only (Telegram: the callback's notice; Slack: an ephemeral
        message; Discord: an ephemeral follow-up; the terminal: a line). Best effort: it never
        raises, and an answer later than ~2 s may be lost where the platform takes one answer
        per press (Telegram: the channel answers blank by itself then)."""

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        """Replace the question's text with ``text`` (rendered, like ``ask``'s: what was decided, by
        whom) and remove its buttons, so that nothing can be pressed any more. Raises
        ``SendFailed`` like ``edit``; a question already showing that text is not an error."""


@runtime_checkable
class OfPeople(Protocol):
    """Sender ids that name the bot's people (the API, the web chat): their sessions, owners, limits."""
    def conversation_of(self, msg: InboundMessage) -> Conversation | None: ...
    def is_owner(self, user_id: str) -> bool: ...
    def limit_key(self, user_id: str) -> str: ...


@runtime_checkable
class SpellsCommands(Protocol):
    def command_text(self, name: str) -> str:
        """How a person types chatgate's command ``name`` here (``/chatgate status``), for /help."""


def spelling(channel: object) -> Callable[[str], str]:
    """How a command is typed on ``channel``: its own way where it ``SpellsCommands``, else ``/name``."""
    return channel.command_text if isinstance(channel, SpellsCommands) else _slash


def _slash(name: str) -> str:
    return f"/{name}"


@runtime_checkable
class Interrupts(Protocol):
    def interrupt(self) -> None:
        """Ctrl-C: stop the running answer (the terminal turns it into ``/stop``). Called from a
        signal handler on the event loop: it must not block."""


@runtime_checkable
class SendsVoice(Protocol):
    async def send_voice(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """Send ``data`` (Ogg/Opus) as a voice note with a rendered caption; the platform's message id."""


@runtime_checkable
class SendsPhoto(Protocol):
    async def send_photo(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """Send ``data`` (PNG, JPEG, ...) as a photo with a rendered caption; the platform's message
        id. A picture the platform cannot show as a photo (too big, odd dimensions) goes as a file."""


@runtime_checkable
class Named(Protocol):
    def names(self) -> tuple[str, ...]:
        """What the bot is called here (its username, its display name); empty before it connected."""


@runtime_checkable
class Windowed(Protocol):
    async def reach(self, to: Target, kind: str, at: float | None) -> str:
        """Whether a message the bot starts on its own reaches ``to``: a scheduled ``kind``
        ("reminder" or "task") due at ``at`` (epoch seconds; None: again and again). "" when it
        will; else one sentence for the person saying when it will not (and what would help)."""


@runtime_checkable
class Connects(Protocol):
    def trouble(self) -> str | None:
        """None while the platform answers; else what is wrong now, in a few words (no secret)."""


LastHeard = Callable[[str, str], Awaitable[float | None]]
"""``(account, chat_id)``: when that chat's person last wrote (epoch seconds), as the store knows it."""


@runtime_checkable
class RecallsInbound(Protocol):
    def recall_inbound(self, last_heard: LastHeard) -> None:
        """Take the store's ``last_heard`` for the channel's platform (called before ``start``)."""


@dataclass(frozen=True, slots=True)
class Undelivered:
    """A message the platform took (``send`` gave its id) and later said it did not deliver. ``retry``: sending
    it again may help (a temporary failure; WhatsApp's window, which a template passes); ``why`` is logged."""

    message_id: str
    why: str
    retry: bool


Reports = Callable[[Undelivered], Awaitable[bool]]
"""Delivery's ledger told (``Delivery.undelivered``): True once it took the report (the chunk owed again, or given
up), False when no stored answer sent that message. Raises when the store cannot take it: it must come again."""


@runtime_checkable
class ReportsUndelivered(Protocol):
    def report_undelivered(self, reports: Reports) -> None:
        """Take delivery's ``reports`` for the channel's platform (called before ``start``)."""
