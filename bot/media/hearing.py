"""The media capability's inbound stage (``bot.intake.stage.InboundStage``): a voice note or
audio file heard outside the lane, as soon as it arrives (access, limits, the fetch, then the transcript,
which becomes the message's text; the intake stores it and runs a spoken urgent command at
once); a group voice note without a caption is heard to see whether it names the bot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.access import Access, Action
from bot.channels import Channel, Named, SendFailed
from bot.commands import command_names
from bot.intake.item import Item
from bot.intake.stage import Admits
from bot.media.naming import addresses, spoken_command
from bot.media.transcription import MediaTranscription, Transcript
from bot.messages import Attachment, InboundMessage, Target
from bot.outbound.outbox import Outbox
from bot.outbound.progress import Progress
from bot.workspace import Workspaces, read_inside

log = logging.getLogger(__name__)


class Hearing:
    """The audio stage: what ``MediaTranscription`` hears, for the intake."""

    name = "transcribing"

    def __init__(self, transcription: MediaTranscription, channels: Mapping[str, Channel], access: Access,
                 workspaces: Workspaces, outbox: Outbox) -> None:
        self._transcription = transcription
        self._channels = channels
        self._access = access
        self._workspaces = workspaces
        self._outbox = outbox

    def wants(self, msg: InboundMessage) -> bool:
        return self._transcription.wants(msg)

    async def prepare(self, item: Item, intake: Admits) -> Item | None:
        """Access, limits, the fetch and the transcript. The message as the lane is to decide it
        (its text the transcript), or None when it was answered (or kept as context) already."""
        fetched: dict[int, bytes] = {}
        if self._transcription.may_address(item.msg):
            addressed = await self._access.check(replace(item.msg, addressed=True))
            if addressed.action is Action.RUN:  # an allowed group, only the mention missing
                spoken = await self._spoken_to(item, fetched, intake)
                if spoken is None:
                    return None
                item = spoken
        if not await intake.admit(item):
            return None
        if not fetched and (refusal := await self._transcription.refuse_early(item.msg, intake.payers(item.msg))):
            await self._outbox.notice(item.msg, refusal, (item.inbound_id,), "unheard", failed=True)
            return None
        msg = await intake.fetch(item, fetched)
        if msg is None:
            return None
        return await self._transcribe(replace(item, msg=msg), intake)

    async def _spoken_to(self, item: Item, fetched: dict[int, bytes], intake: Admits) -> Item | None:
        """A group voice note without a caption: downloaded and heard (nothing saved yet); the
        message addressed when its transcript names the bot, else kept as context with it."""
        msg = item.msg
        channel = self._channels[msg.platform]
        limit = min(self._transcription.max_bytes, intake.max_download(msg.platform))
        heard: list[Attachment] = []
        for att in msg.attachments:
            if att.audible and att.transcript is None and self._transcription.too_big(att) is None:
                try:
                    data = await channel.fetch(att, limit)
                except SendFailed as exc:
                    log.info("voice note of inbound %s not fetched: %s", item.inbound_id, exc)
                    continue
                result = await self._transcription.transcribe(att, data, intake.payers(msg))
                att = replace(att, transcript=result.text if result.refusal is None else "")
                fetched[id(att)] = data
            heard.append(att)
        said = _said(heard)
        names = channel.names() if isinstance(channel, Named) else ()
        if said and addresses(said, names):
            return replace(item, msg=replace(msg, addressed=True, attachments=tuple(heard)))
        await intake.keep_as_context(item, replace(msg, text=said, attachments=tuple(heard)))
        return None

    async def _transcribe(self, item: Item, intake: Admits) -> Item | None:
        """Each saved voice note or audio file of the message heard, "typing…" meanwhile; its
        text the transcript (a spoken command as typed), or None after the one sentence."""
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
                    result = await self._transcription.transcribe(att, data, intake.payers(msg))
                except ValueError:  # bigger than the platform said
                    too_big = replace(att, size=self._transcription.max_bytes + 1)
                    result = Transcript(refusal=self._transcription.too_big(too_big))
                if result.refusal is not None:
                    await self._outbox.notice(msg, result.refusal, (item.inbound_id,), "unheard", failed=True)
                    return None
                heard[i] = replace(att, transcript=result.text)
        said = _said(heard)
        if not said:  # nothing to say (heard before, as context): one sentence, never an empty turn
            await self._outbox.notice(msg, self._transcription.nothing_heard, (item.inbound_id,), "unheard",
                                      failed=True)
            return None
        if (echo := self._transcription.echo(said)) is not None:
            await self._outbox.notice(msg, echo, (), "heard")
        caption = msg.text.strip()
        text = f"{caption}\n\n{said}" if caption else spoken_command(said, command_names()) or said
        return replace(item, msg=replace(msg, text=text, attachments=tuple(heard)))


def _said(attachments: Sequence[Attachment]) -> str:
    """What the message's voice notes and audio files say, together."""
    return "\n\n".join(a.transcript for a in attachments if a.audible and a.transcript)
