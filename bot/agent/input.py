"""The new user turn of a run: the inbound messages (one, or a batch collected while busy),
their uploads saved in the workspace and saved images read back for the model, the group's
context since the bot last spoke, all passed through the input guard (``bot.agent.guard``),
turned into the one user message the model sees, with what the run's toolsets add to it
before its text (``with_context``: recall's passages). A task (a sub-agent's, a scheduled
job's) is its text as it is.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import cast

from bot.agent.guard import GuardMode, check_input
from bot.agent.transcript import context_block, group_turn
from bot.llm import ImagePart, Message, Part, Role, TextPart
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, clean_text
from bot.tools.base import ToolContext
from bot.tools.toolset import AddsContext, Toolset
from bot.workspace import read_inside, save_upload

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 32 * 1024 * 1024  # an image read back from the workspace for the model


@dataclass(frozen=True, slots=True)
class NewInput:
    """The run's user message, and whether the guard blocked one of its messages (block
    mode: the run then answers ``guard.REFUSAL`` without calling the model)."""

    message: Message
    blocked: bool = False


def new_input(inbound: tuple[InboundMessage, ...], context: tuple[InboundMessage, ...], task: str, *,
              guard: GuardMode, max_chars: int, session_key: str, owners: Collection[str]) -> NewInput:
    """The user message of a run of ``inbound`` (uploads already saved) with the group's
    ``context``, each message checked by the guard (truncated to ``max_chars``, scanned);
    without inbound messages, ``task`` as it is (its author is the bot's own side: no guard,
    no header)."""
    verdicts = {id(m): check_input(m.text, mode=guard, max_chars=max_chars, session_key=session_key)
                for m in inbound}
    # the group context is scanned too: in block mode the lines that hit are left out
    kept = tuple(m for m in context
                 if not check_input(m.text, mode=guard, max_chars=max_chars, session_key=session_key).blocked)
    if not inbound:
        return NewInput(Message.user(clean_text(task.strip())))
    message = user_message(inbound, lambda m: verdicts[id(m)].text, kept, owners=owners,
                           dropped_context=len(context) - len(kept))
    return NewInput(message, any(v.blocked for v in verdicts.values()))


def user_message(inbound: tuple[InboundMessage, ...], text_of: Callable[[InboundMessage], str],
                 context: tuple[InboundMessage, ...] = (), *, owners: Collection[str] = (),
                 dropped_context: int = 0) -> Message:
    """The user turn the model sees. In a group every message (the context first, then the
    addressed ones) is a header naming its sender and its text quoted line by line (see
    ``bot.agent.transcript``), so no member can write a line that passes for another's;
    in a DM the texts as they are. Images go inline, saved files are named."""
    parts: list[Part] = []
    notes: dict[int, list[str]] = {}
    for msg in inbound:
        notes[id(msg)] = []
        for att in msg.attachments:
            if att.kind is AttachmentKind.IMAGE and att.data is not None:
                parts.append(ImagePart(att.mime_type or "image/jpeg", base64.b64encode(att.data).decode()))
            elif att.path and att.audible:
                what = "voice note" if att.kind is AttachmentKind.VOICE else "audio"
                heard = "its transcript is the text above" if att.transcript else "it was not transcribed"
                notes[id(msg)].append(f"[{what} saved in the workspace: {att.path}; {heard}]")
            elif att.path:
                notes[id(msg)].append(f"[{att.kind.value} saved in the workspace: {att.path}]")
    if inbound and inbound[-1].chat_type is ChatType.GROUP:
        block = context_block(context, owners, dropped=dropped_context)
        text = group_turn(inbound, text_of, lambda m: notes[id(m)], owners, block)
    else:
        text = "\n\n".join(part for m in inbound for part in (text_of(m), *notes[id(m)]))
    return Message(Role.USER, (TextPart(clean_text(text.strip())), *parts))


async def save_uploads(workspace: Path, inbound: tuple[InboundMessage, ...]) -> tuple[InboundMessage, ...]:
    """Files that came with the messages as bytes saved in the workspace's inbox (images
    keep their bytes for the model); saved images read back for the model. The intake
    fetches files into the inbox before a run, so usually only the images are read."""
    if not any((a.data is not None and a.kind is not AttachmentKind.IMAGE)
               or (a.kind is AttachmentKind.IMAGE and a.data is None and a.path)
               for m in inbound for a in m.attachments):
        return inbound

    def save(att: Attachment) -> Attachment:
        if att.kind is AttachmentKind.IMAGE:
            if att.data is None and att.path:
                try:
                    return replace(att, data=read_inside(workspace, att.path, MAX_IMAGE_BYTES))
                except (OSError, ValueError) as exc:  # a link out included: never followed
                    log.warning("image %s cannot be read: %s", att.path, exc)
            return att
        if att.data is None:
            return att
        return replace(att, path=save_upload(workspace, att.name, att.data), data=None)

    def save_all() -> tuple[InboundMessage, ...]:
        return tuple(replace(m, attachments=tuple(map(save, m.attachments))) for m in inbound)

    return await asyncio.to_thread(save_all)


async def with_context(toolsets: Sequence[Toolset], ctx: ToolContext, message: Message) -> Message:
    """The turn's message with what the toolsets that are ``AddsContext`` put before its text; a
    toolset that fails adds nothing (logged), the turn goes on."""
    added: list[Part] = []
    for toolset in toolsets:
        if _adds_context(type(toolset)):
            try:
                if text := await cast(AddsContext, toolset).context(ctx, message.text):
                    added.append(TextPart(text))
            except Exception:
                log.exception("context of a toolset failed session=%s run=%s", ctx.session_key, ctx.run_id)
    return replace(message, parts=(*added, *message.parts)) if added else message


@cache
def _adds_context(kind: type) -> bool:
    """Whether a toolset's class is ``AddsContext``, decided once per class (a runtime-checkable
    Protocol's test looks at every member each time: asked for every toolset of every turn)."""
    return issubclass(kind, AddsContext)
