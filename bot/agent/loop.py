"""One run of the agent: history + new message -> provider -> answer, stored atomically.

This is the first agent turn (no tools yet): setup, build messages, stream one LLM
call, store the turn, return a ``RunResult``. Errors meant for users come back as a
result with one human sentence; cancellation stores what was said so far and propagates.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum

from bot.agent.events import EventBus, EventKind, RunEvent
from bot.conversation import ImagePart, Message, Part, Role, TextPart
from bot.errors import ProviderError
from bot.messages import AttachmentKind, ChatType, InboundMessage
from bot.providers.base import ChatRequest, Completed, Provider, RetryInfo, TextDelta, Usage
from bot.store.base import Session, Store, Turn

log = logging.getLogger(__name__)

HISTORY_LIMIT = 200  # messages; the history pipeline (turn limits, pruning) replaces this

DEFAULT_SYSTEM_PROMPT = """\
You are chatgate, a helpful, honest assistant chatting with people on {platform} in a {chat}.
Answer clearly and briefly; use Markdown where it helps. If you do not know, say so.
Current time: {now}."""


class RunStatus(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    SILENT = "silent"


@dataclass(frozen=True, slots=True)
class RunRequest:
    run_id: str
    session: Session
    session_key: str
    inbound: tuple[InboundMessage, ...]  # one, or several collected while busy
    inbound_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    status: RunStatus
    text: str = ""  # the final answer, Markdown
    usage: Usage = Usage()
    cost: float = 0.0
    iterations: int = 0
    error: str | None = None  # one sentence for the user when status is failed


@dataclass(frozen=True, slots=True)
class AgentSettings:
    agent_id: str
    model: str
    max_tokens: int = 4096
    system_prompt: str | None = None  # extra instructions appended to the default


def user_message(inbound: tuple[InboundMessage, ...]) -> Message:
    """The user turn the model sees: texts in order, senders named in groups, images inline."""
    parts: list[Part] = []
    texts: list[str] = []
    for msg in inbound:
        text = msg.text
        if msg.chat_type is ChatType.GROUP:
            text = f"[{msg.sender.name or msg.sender.username or msg.sender.id}] {text}"
        texts.append(text)
        for att in msg.attachments:
            if att.kind is AttachmentKind.IMAGE and att.data is not None:
                parts.append(ImagePart(att.mime_type or "image/jpeg", base64.b64encode(att.data).decode()))
    return Message(Role.USER, (TextPart("\n\n".join(texts)), *parts))


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        provider: Provider,
        store: Store,
        events: EventBus,
        cost: Callable[[str, Usage], float],
        clock: Callable[[], str],
    ) -> None:
        self._settings = settings
        self._provider = provider
        self._store = store
        self._events = events
        self._cost = cost
        self._clock = clock

    def system_prompt(self, inbound: InboundMessage) -> str:
        chat = "direct chat" if inbound.chat_type is ChatType.DM else "group chat"
        prompt = DEFAULT_SYSTEM_PROMPT.format(platform=inbound.platform, chat=chat, now=self._clock())
        if self._settings.system_prompt:
            prompt += "\n\n" + self._settings.system_prompt
        return prompt

    async def run(self, request: RunRequest) -> RunResult:
        emit = self._emitter(request)
        await emit(EventKind.STARTED)
        user = user_message(request.inbound)
        history = await self._store.history(request.session, limit=HISTORY_LIMIT)
        chat = ChatRequest(
            model=self._settings.model,
            system=self.system_prompt(request.inbound[-1]),
            messages=(*history, user),
            max_tokens=self._settings.max_tokens,
        )

        async def on_retry(info: RetryInfo) -> None:
            await self._events.emit(RunEvent(EventKind.RETRYING, request.run_id, request.session_key, retry=info))

        streamed: list[str] = []
        try:
            async with aclosing(self._provider.stream(chat, on_retry=on_retry)) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        streamed.append(event.text)
                        await emit(EventKind.CHUNK, event.text)
                    elif isinstance(event, Completed):
                        completed = event
        except ProviderError as exc:
            log.warning("run failed session=%s run=%s: %s", request.session_key, request.run_id, exc)
            await self._store.append_turn(Turn(request.session, request.run_id, (user,), inbound_ids=request.inbound_ids))
            await emit(EventKind.FAILED, exc.user_message)
            return RunResult(request.run_id, RunStatus.FAILED, error=exc.user_message, iterations=1)
        except asyncio.CancelledError:
            partial = "".join(streamed)
            kept = (user, Message.assistant(partial)) if partial else (user,)
            await self._store.append_turn(Turn(request.session, request.run_id, kept, inbound_ids=request.inbound_ids))
            await emit(EventKind.CANCELLED)
            raise

        cost = self._cost(completed.model or self._settings.model, completed.usage)
        await self._store.append_turn(
            Turn(request.session, request.run_id, (user, completed.message), completed.usage, cost,
                 completed.model or self._settings.model, request.inbound_ids)
        )
        text = completed.message.text.strip()
        await self._events.emit(
            RunEvent(EventKind.COMPLETED, request.run_id, request.session_key, text, usage=completed.usage)
        )
        return RunResult(request.run_id, RunStatus.COMPLETED, text, completed.usage, cost, iterations=1)

    def _emitter(self, request: RunRequest) -> Callable[..., object]:
        async def emit(kind: EventKind, text: str = "") -> None:
            await self._events.emit(RunEvent(kind, request.run_id, request.session_key, text))

        return emit
