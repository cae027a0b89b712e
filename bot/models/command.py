"""``/model``: this chat's model, and who may change it.

- ``/model``: the current model and why (the default, or picked with ``/model``), with the
  models the sender may pick: as buttons where the channel ``Asks`` (one per model, ids
  ``model:<name>``, ``model:default`` for the default), else as a list to type;
- ``/model <name>`` picks a model for the conversation (stored by its session key: it stays
  across restarts, compactions and ``/new``; the history is kept); ``/model default`` goes
  back to the default;
- a pressed button comes back as an inbound message replying to the picker, its text the
  button's id: it picks like ``/model <name>`` and the picker is closed with the outcome.

Who may pick what is ``choice.may_pick``; in a group only an owner (the group's model is what
everyone there pays for). In a group, a refused pick gets no reply (as admin commands
there), a press gets its short private answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from bot.channels import Asks, Channel, Choice, SendFailed
from bot.commands import CommandCall, Reply
from bot.conversation import Conversation
from bot.messages import ChatType, InboundMessage, Target
from bot.outbound.split import render_chunks
from bot.routing.choice import DEFAULT, choice_id, may_pick, may_switch, parse_choice, pickable
from bot.routing.router import Models
from bot.routing.spec import ModelSpec, model_line
from bot.store.base import ModelStore, Store

log = logging.getLogger(__name__)

NOT_YOURS = "Only an owner can change the model here."
RUN_STATUSES = ("completed", "silent", "failed", "cancelled")  # traces of runs (not compactions or titles)


class CommandStore(Store, ModelStore, Protocol):
    """What ``/model`` and ``/status`` read: traces, titles (and the choice, through ``Models``)."""


class ModelCommand:
    def __init__(self, models: Models, channels: Mapping[str, Channel], store: CommandStore) -> None:
        self._models = models
        self._channels = channels
        self._store = store

    async def run(self, call: CommandCall, spell: Callable[[str], str]) -> Reply | None:
        """``/model [name]``; None when it answered on its own (buttons) or says nothing (a
        refusal in a group)."""
        name = call.command.args.strip().split(" ")[0]
        if not name:
            shown = await self._show(call, spell)
        else:
            reply, _ = await self._pick(call.conversation, name, _person(call.msg), call.owner, spell)
            shown = None if reply is None and call.msg.chat_type is not ChatType.DM else Reply(reply or NOT_YOURS)
        if shown is None:  # a picker was shown, or a refusal in a group says nothing: answered all the same
            await self._store.mark_answered((call.inbound_id,))
        return shown

    # -- presses ---------------------------------------------------------------------------

    def claims(self, msg: InboundMessage) -> bool:
        """A pressed button of a picker (a reply to it whose text is ``model:<name>``)."""
        return msg.reply_to is not None and parse_choice(msg.text) is not None

    async def press(self, msg: InboundMessage, conversation: Conversation, owner: bool) -> None:
        name = parse_choice(msg.text) or ""
        channel = self._channels.get(msg.platform)
        reply, picked = await self._pick(conversation, name, _person(msg), owner, lambda n: f"/{n}")
        if not isinstance(channel, Asks):
            return
        try:
            if picked and msg.reply_to is not None:
                who = msg.sender.name or msg.sender.username or msg.sender.id
                await channel.close_question(Target(msg.chat_id, msg.chat_type, msg.thread_id), msg.reply_to,
                                             _rendered(channel, f"{reply} (by {who})"))
            await channel.answer_press(msg, None if picked else reply or NOT_YOURS)
        except Exception:  # noqa: BLE001 - the picker's update is cosmetic; the choice is stored
            log.info("answering a model press in %s:%s failed", msg.platform, msg.chat_id, exc_info=True)

    # -- /status -------------------------------------------------------------------------

    async def status_lines(self, call: CommandCall) -> list[str]:
        """``/status``'s lines: the model of the last run and why, when it is not the conversation's
        model now (a fallback answered, or the choice changed since), and the session's title."""
        conversation = call.conversation
        session = await self._store.session(conversation)
        current = (await self._models.plan(conversation)).route
        lines = []
        traces = await self._store.traces(conversation.session_key, last=5)
        last = next((t for t in reversed(traces) if t.status in RUN_STATUSES), None)
        if last is not None and last.why and (last.model, last.why) != (current.spec.model, current.why_text):
            lines.append(f"Last answer: {last.model} ({last.why})")
        if (title := await self._store.title(session)) is not None:
            lines.append(f"Title: {title}")
        return lines

    # -- internals -------------------------------------------------------------------------

    async def _show(self, call: CommandCall, spell: Callable[[str], str]) -> Reply | None:
        catalog = self._models.catalog
        route = (await self._models.plan(call.conversation)).route
        text = f"Model: {model_line(route)}"
        if not catalog.named:
            return Reply(f"{text}\nNo other models are configured.")
        person = _person(call.msg)
        group = call.conversation.is_group
        if not may_switch(catalog, person, owner=call.owner, group=group):
            return Reply(f"{text}\nOnly an owner can change it.")
        options = [catalog.default, *(s for s in pickable(catalog, person, owner=call.owner, group=group)
                                      if s != catalog.default)]
        channel = self._channels.get(call.msg.platform)
        if isinstance(channel, Asks):
            choices = [Choice(choice_id(DEFAULT), _label(catalog.default, "default"))]
            choices += [Choice(choice_id(s.name), _label(s)) for s in options[1:]]
            try:
                await channel.ask(Target.of(call.msg), _rendered(channel, f"{text}\nPick the model for this chat:"),
                                  choices)
                return None
            except (SendFailed, OSError, ValueError) as exc:
                log.info("the model picker could not be shown in %s:%s: %s", call.msg.platform, call.msg.chat_id,
                         exc)
        listed = ", ".join([f"default ({catalog.default.label})", *(s.name for s in options[1:])])
        return Reply(f"{text}\nModels: {listed}.\nPick one with {spell('model')} <name>; "
                     f"{spell('model')} default goes back to the default.")

    async def _pick(self, conversation: Conversation, name: str, person: str, owner: bool,
                    spell: Callable[[str], str]) -> tuple[str | None, bool]:
        """(what to say, whether the model changed); nothing to say: not theirs to change."""
        catalog = self._models.catalog
        group = conversation.is_group  # everyone there is charged for the group's model: owners only
        if name == DEFAULT:
            if not may_switch(catalog, person, owner=owner, group=group):
                return None, False
            await self._models.choose(conversation, None, person)
            return f"Back to the default model: {catalog.default.label}.", True
        spec = catalog.get(name)
        if spec is None:
            known = ", ".join(s.name for s in catalog.named) or "none are configured"
            return f'There is no model "{name}" (models: {known}).', False
        if not may_pick(catalog, spec, person, owner=owner, group=group):
            return None, False
        await self._models.choose(conversation, spec, person)
        return (f"Model for this chat: {spec.name} ({spec.model}). {spell('model')} default goes back to "
                f"{catalog.default.label}."), True


def _label(spec: ModelSpec, name: str = "") -> str:
    shown = name or spec.name
    return f"{shown} · {spec.model}" if shown != spec.model else shown


def _rendered(channel: Channel, markdown: str) -> str:
    """The picker's text as ``ask`` and ``close_question`` take it: in the channel's dialect, one message."""
    chunks = render_chunks(markdown, channel.dialect, channel.shape)
    return chunks[0] if chunks else markdown


def _person(msg: InboundMessage) -> str:
    return f"{msg.platform}:{msg.sender.id}"
