"""The whole bot in the benchmark's own process, for ``bench.stop_latency`` and
``bench.concurrency``: a recording channel that notes when replies and events happen, and
the App against the fake LLM in a child process (``python -m bench`` runs the bot in a
process of its own instead, behind the fake Telegram)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import FakeLLMProcess
from bot.agent.events import RunEvent
from bot.app import App
from bot.channels import Target
from bot.settings import Config, load_config
from tests.fakes.channel import RecordingChannel

PLATFORM = "telegram"  # a real platform name, so its access policy (dm_policy: open) applies


@dataclass(frozen=True, slots=True)
class Seen:
    at: float  # time.monotonic()
    text: str


class TimingChannel(RecordingChannel):
    """A RecordingChannel that notes when each reply was handed to it and lets a caller
    wait for the next reply or event in one chat. ``keep_events=False`` counts progress
    events instead of keeping them, so a big run does not inflate the bot's memory."""

    def __init__(self, platform: str = PLATFORM, *, keep_events: bool = True) -> None:
        super().__init__(platform)
        self.keep_events = keep_events
        self.sent_at: list[float] = []
        self.shown = 0
        self._expected: dict[tuple[str, str], tuple[str | None, asyncio.Future[Seen]]] = {}

    def expect(self, chat_id: str, kind: str, text: str | None = None) -> asyncio.Future[Seen]:
        """The next ``kind`` in the chat: ``"send"`` (a reply) or an event kind, with ``text`` if given."""
        future: asyncio.Future[Seen] = asyncio.get_running_loop().create_future()
        self._expected[(chat_id, kind)] = (text, future)
        return future

    async def send(self, to: Target, text: str) -> str:
        self.sent_at.append(self._mark(to.chat_id, "send", text))
        return await super().send(to, text)

    async def _record_event(self, event: RunEvent) -> None:
        chat_id = event.session_key.rsplit(":", 1)[-1]  # DMs: the session key ends with the user (= chat) id
        self._mark(chat_id, event.kind, event.text)
        self.shown += 1
        if self.keep_events:
            await super()._record_event(event)

    def _mark(self, chat_id: str, kind: str, text: str) -> float:
        now = time.monotonic()
        wanted = self._expected.get((chat_id, kind))
        if wanted is not None and wanted[0] in (None, text):
            del self._expected[(chat_id, kind)]
            if not wanted[1].done():
                wanted[1].set_result(Seen(now, text))
        return now


def bot_config(tmp: Path, openai_base_url: str, extra: str = "") -> Config:
    path = tmp / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: bench-key, base_url: "{openai_base_url}"}}}}
storage: {{path: "{tmp / 'chatgate.db'}"}}
workspace: {{root: "{tmp / 'workspaces'}"}}
channels: {{{PLATFORM}: {{dm_policy: open}}}}
{extra}
""")
    return load_config(path, env={})


@asynccontextmanager
async def running_bot(fake_args: Sequence[str], extra_config: str = "", *,
                      keep_events: bool = True) -> AsyncIterator[tuple[FakeLLMProcess, App, TimingChannel]]:
    """The fake LLM in a child process, and the whole bot in this one, in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-") as tmp:
        async with FakeLLMProcess(*fake_args) as llm:
            channel = TimingChannel(keep_events=keep_events)
            app = App(bot_config(Path(tmp), llm.openai_base_url, extra_config), {PLATFORM: channel})
            channel.watch(app.events)
            async with app:
                yield llm, app, channel
