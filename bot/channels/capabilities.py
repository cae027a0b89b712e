"""What only some channels can do, each a small Protocol of its own (STYLE habit 21).

A capability is checked once, with ``isinstance``, where the channel is wired (progress
takes a channel's ``Streams`` and ``Notes`` when it is made; the command line takes the
terminal's ``Interrupts``), never looked up by name where it is used. A channel offers one
by having the method: there is nothing to register.

- ``Streams``: the platform's own streaming message (Slack's chat.startStream, the
  terminal printing deltas), used by progress when the channel's ``streaming`` is ``native``.
- ``Notes``: a line about a run's activity (a tool call, a retry): the terminal.
- ``Asks``: a question with buttons. No channel offers it yet; approvals will.
- ``Interrupts``: Ctrl-C in the terminal stops the running answer.
- ``SpellsCommands``: a platform where a command is typed otherwise than ``/name`` (Slack
  keeps ``/status`` and ``/help`` for itself: there they are ``/chatgate status``).
- ``SendsVoice``: a voice note the platform plays inline (Telegram's voice bubble); elsewhere
  a voice answer goes as an audio file (``send_file``).
- ``Named``: what the bot is called there, so that a spoken message can address it by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bot.messages import Target


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
    """One button of a question: ``id`` comes back when it is pressed, ``label`` is shown."""

    id: str
    label: str


@runtime_checkable
class Asks(Protocol):
    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        """Show ``text`` (rendered in the channel's dialect) with one button per choice; the
        platform's id of that message.

        A press is not an answer to this call (it may come hours later, after a restart): it
        comes back through the channel's ``Inbox`` as an ``InboundMessage`` from the person who
        pressed it, in the chat and thread of the question, with ``reply_to`` the id this call
        returned and ``text`` the pressed choice's ``id``. The core decides what a press means
        (and who may press) like any other inbound message."""


@runtime_checkable
class SpellsCommands(Protocol):
    def command_text(self, name: str) -> str:
        """How a person types chatgate's command ``name`` here (``/chatgate status``), for /help."""


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
class Named(Protocol):
    def names(self) -> tuple[str, ...]:
        """What the bot is called here (its username, its display name); empty before it connected."""
