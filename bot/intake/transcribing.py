"""The intake's inbound stage for audio: a voice note or audio file heard outside the lane, as
soon as it arrives (access, limits, the fetch, then the transcript, which becomes the message's
text), by the capability that offers a ``Transcription`` (``bot.stages``: the media capability); a group
voice note without a caption is heard to see whether it names the bot. ``Intake`` is made of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.access import Access, Action, GroupContext
from bot.channels import Channel, Named, SendFailed
from bot.commands import by_name, command_names, parse_command
from bot.intake.item import IntakeSettings, Item
from bot.messages import Attachment, InboundMessage, Target
from bot.outbound.progress import Progress
from bot.stages import Transcript, Transcription
from bot.text.naming import addresses, spoken_command
from bot.turns import Turns, TurnStore
from bot.workspace import Workspaces, read_inside

log = logging.getLogger(__name__)


class TranscribingStage:
    """The audio stage, a part of ``Intake`` (which sets these and has the methods below)."""

    _transcription: Transcription | None
    _access: Access
    _channels: Mapping[str, Channel]
    _settings: IntakeSettings
    _context: GroupContext
    _store: TurnStore
    _workspaces: Workspaces
    _turns: Turns

    if TYPE_CHECKING:
        def limit_keys(self, msg: InboundMessage) -> tuple[str, ...]: ...
        async def _allowed(self, item: Item) -> bool: ...
        async def _within_limits(self, msg: InboundMessage, inbound_id: int) -> bool: ...
        async def _late(self, item: Item) -> bool: ...
        async def _fetch(self, item: Item, downloaded: Mapping[int, bytes] | None = None) -> InboundMessage | None: ...
        async def _command(self, item: Item) -> None: ...

    async def _audio_stage(self, item: Item) -> Item | None:
        """Access, limits, the fetch and the transcript; a spoken urgent command runs here and
        now. The message as the lane is to decide it (its text the transcript), or None when
        it was answered (or kept as context) already."""
        assert self._transcription is not None
        fetched: dict[int, bytes] = {}
        if self._transcription.may_address(item.msg):
            addressed = await self._access.check(replace(item.msg, addressed=True))
            if addressed.action is Action.RUN:  # an allowed group, only the mention missing
                spoken = await self._spoken_to(item, fetched)
                if spoken is None:
                    return None
                item = spoken
        if not await self._allowed(item) or not await self._within_limits(item.msg, item.inbound_id) \
                or await self._late(item):
            return None
        if not fetched and (refusal := await self._transcription.refuse_early(item.msg, self._payers(item.msg))):
            await self._turns.outbox.notice(item.msg, refusal, (item.inbound_id,), "unheard", failed=True)
            return None
        msg = await self._fetch(item, fetched)
        if msg is None:
            return None
        item = replace(item, msg=msg)
        heard = await self._transcribe(item)
        if heard is None:
            return None
        await self._store.update_inbound(heard.inbound_id, heard.msg)  # a recovered message is not heard twice
        command = parse_command(heard.msg.text)
        if command is not None and by_name(command.name).urgent:
            await self._command(heard)
            return None
        return heard

    async def _decide_heard(self, item: Item) -> None:
        """The lane's part of a heard message: a command in its turn, else its run."""
        if parse_command(item.msg.text) is not None:
            await self._command(item)
        else:
            self._turns.submit(item.conversation, item.msg, item.inbound_id)

    async def _spoken_to(self, item: Item, fetched: dict[int, bytes]) -> Item | None:
        """A group voice note without a caption: downloaded and heard (nothing saved yet); the
        message addressed when its transcript names the bot, else kept as context with it."""
        assert self._transcription is not None
        msg = item.msg
        channel = self._channels[msg.platform]
        limit = min(self._transcription.max_bytes,
                    (self._settings.max_download or {}).get(msg.platform, 20 * 1024 * 1024))
        heard: list[Attachment] = []
        for att in msg.attachments:
            if att.audible and att.transcript is None and self._transcription.too_big(att) is None:
                try:
                    data = await channel.fetch(att, limit)
                except SendFailed as exc:
                    log.info("voice note of inbound %s not fetched: %s", item.inbound_id, exc)
                    continue
                result = await self._transcription.transcribe(att, data, self._payers(msg))
                att = replace(att, transcript=result.text if result.refusal is None else "")
                fetched[id(att)] = data
            heard.append(att)
        said = _said(heard)
        names = channel.names() if isinstance(channel, Named) else ()
        if said and addresses(said, names):
            return replace(item, msg=replace(msg, addressed=True, attachments=tuple(heard)))
        self._context.remember(replace(msg, text=said, attachments=tuple(heard)))
        await self._store.keep_as_context(item.inbound_id)
        return None

    async def _transcribe(self, item: Item) -> Item | None:
        """Each saved voice note or audio file of the message heard, "typing…" meanwhile; its
        text the transcript (a spoken command as typed), or None after the one sentence."""
        assert self._transcription is not None
        msg = item.msg
        channel = self._channels[msg.platform]
        workspace = await self._workspaces.prepare(item.conversation)
        heard = list(msg.attachments)
        async with Progress(channel, Target.of(msg)):
            for i, att in enumerate(heard):
                if not att.audible or att.transcript is not None or att.path is None:
                    continue
                try:
                    data = await asyncio.to_thread(read_inside, workspace, att.path, self._transcription.max_bytes)
                    result = await self._transcription.transcribe(att, data, self._payers(msg))
                except ValueError:  # bigger than the platform said
                    too_big = replace(att, size=self._transcription.max_bytes + 1)
                    result = Transcript(refusal=self._transcription.too_big(too_big))
                if result.refusal is not None:
                    await self._turns.outbox.notice(msg, result.refusal, (item.inbound_id,), "unheard", failed=True)
                    return None
                heard[i] = replace(att, transcript=result.text)
        said = _said(heard)
        if not said:  # nothing to say (heard before, as context): one sentence, never an empty turn
            await self._turns.outbox.notice(msg, self._transcription.nothing_heard, (item.inbound_id,), "unheard",
                                            failed=True)
            return None
        if (echo := self._transcription.echo(said)) is not None:
            await self._turns.outbox.notice(msg, echo, (), "heard")
        caption = msg.text.strip()
        text = f"{caption}\n\n{said}" if caption else spoken_command(said, command_names()) or said
        return replace(item, msg=replace(msg, text=text, attachments=tuple(heard)))

    def _payers(self, msg: InboundMessage) -> tuple[str, ...]:
        """Whose minutes a message's audio counts against: none for an owner."""
        return () if self._access.is_owner(msg) else self.limit_keys(msg)


def _said(attachments: Sequence[Attachment]) -> str:
    """What the message's voice notes and audio files say, together."""
    return "\n\n".join(a.transcript for a in attachments if a.audible and a.transcript)
