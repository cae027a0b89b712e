"""The running application: store, provider, agent, intake, turns and channels, as one lifecycle.

    async with App(config, channels) as app:
        await app.wait()

Entering opens everything in order and, if any step fails, closes what was opened;
leaving stops the channels first (no new input), cancels runs, then closes the
provider and the store.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path

from bot.access import Access, GroupContext, access_policies
from bot.agent.compaction import CompactionSettings
from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult, RunStatus
from bot.agent.spawn import SubAgents, spawn_tool
from bot.approvals import Approvals, approval_settings
from bot.channels import Channel, registry
from bot.conversation import ChannelInfo, person_of
from bot.delivery import Delivery, DeliverySettings
from bot.hooks import pre_tool_hooks
from bot.intake import Intake, IntakeSettings
from bot.limits import LimitSettings, PersonLimits, limit_keys
from bot.models.command import ModelCommand
from bot.models.config import open_models
from bot.models.titles import Titles
from bot.runs import QueueMode, RunCaps
from bot.settings import Config
from bot.store.sqlite import SQLiteStore
from bot.tools import policy_for, registry_from_config
from bot.tools.message import message_tool
from bot.tracing import Redactor
from bot.turns import Turns
from bot.workspace import Workspaces

log = logging.getLogger(__name__)

# The templates that ship with chatgate: workspaces/templates/ beside the bot package.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent.parent / "workspaces" / "templates"


def channel_info(name: str) -> ChannelInfo:
    """What the prompt shows of a channel: its spec's name in prose and formatting hints."""
    try:
        spec = registry.spec(name)
    except KeyError:  # a channel built by hand (tests, a plugin not registered)
        return ChannelInfo(name)
    return ChannelInfo(name, spec.display, spec.hints)


class App:
    def __init__(self, config: Config, channels: Mapping[str, Channel]) -> None:
        self.config = config
        self.channels = dict(channels)
        self.events = EventBus()
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> App:
        try:
            await self._open()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _open(self) -> None:
        cfg = self.config
        self.store = await self._stack.enter_async_context(SQLiteStore(cfg.storage.path))
        self.models = models = await open_models(cfg, self.store)  # the providers of every model in use
        self._stack.push_async_callback(models.aclose)
        default = models.default.route
        self.provider, cost = default.provider, default.cost
        a, spec = cfg.agent, default.spec
        settings = AgentSettings(
            agent_id=a.id, provider=spec.provider, model=spec.model, max_tokens=spec.max_tokens,
            max_iterations=a.max_iterations, context_window=spec.context_window, max_message_chars=a.max_message_chars,
            history_turns=a.history_turns, guard=GuardMode(a.input_guard), system_prompt=a.system_prompt,
            compaction=CompactionSettings(**a.compaction.model_dump()), owners=cfg.owner_ids(),
            max_tool_calls_per_step=cfg.limits.max_tool_calls_per_step,
        )
        templates = cfg.workspace.templates or BUILTIN_TEMPLATES
        if not templates.is_dir():
            log.warning("workspace templates not found at %s; new workspaces start empty", templates)
        workspaces = Workspaces(cfg.workspace.root, templates)
        redactor = Redactor(cfg.secret_values())
        lim = cfg.limits
        person_limits = PersonLimits(LimitSettings(lim.messages_per_minute, lim.daily_tokens, lim.daily_cost_usd),
                                     self.store)
        meter = person_limits.charge if person_limits.active else None
        policies = access_policies(cfg.channels)
        self.approvals = approvals = Approvals(
            self.store, self.channels, approval_settings(cfg.tools),
            is_owner=lambda platform, user_id: (p := policies.get(platform)) is None or user_id in p.owners,
            mask=redactor, hooks=pre_tool_hooks(cfg.hooks, cfg.exec_settings()))
        self._stack.push_async_callback(approvals.aclose)
        tools = registry_from_config(cfg.tools, cfg.exec_settings())
        tools.register(spawn_tool(SubAgents(settings, self.provider, self.store, tools, workspaces, cost, redactor,
                                            meter=meter, gate=approvals, models=models)))
        titles = Titles(models, self.store, agent_id=a.id, meter=meter, redactor=redactor)
        self._stack.push_async_callback(titles.aclose)

        async def title(request: RunRequest, result: RunResult) -> None:  # after the turn is stored
            titles.after(request.session, request.conversation, request.run_id,
                         result.turn.messages if result.turn else (),
                         result.text if result.status is RunStatus.COMPLETED else "", result.live_messages,
                         request.payers)

        agent = Agent(settings, self.provider, self.store, self.events, tools, workspaces, cost, redactor, meter=meter,
                      gate=approvals, models=models, post_run=(title,))
        r = cfg.runs
        limits = RunCaps(r.max_concurrent, r.max_per_group, QueueMode(r.queue_mode), r.debounce_ms / 1000,
                           r.max_queued)
        downloads = {name: cfg.max_download_bytes(name) for name in self.channels}
        self.delivery = Delivery(self.store, self.channels, DeliverySettings(retry_for=cfg.delivery.retry_for))
        access = Access(policies, self.store)
        context = GroupContext()
        intake_settings = IntakeSettings(
            a.id, a.dm_scope, a.identity_links, cfg.workspace.group_scope,
            {name: channel_info(name) for name in self.channels}, r.recover_max_age, downloads,
            cfg.storage.retention.context * 86400)
        keys = lambda msg: limit_keys(msg, person_of(msg.platform, msg.sender.id, a.identity_links))  # noqa: E731
        self.turns = Turns(
            agent, self.store, self.events, self.channels, self.delivery, context, limits=limits,
            is_owner=access.is_owner, keys=keys, person_limits=person_limits,
            policy=lambda conv, owner: policy_for(cfg.tools, policies.get(conv.platform), platform=conv.platform,
                                                  chat_type=conv.chat_type.value, chat_id=conv.chat_id, is_owner=owner))
        self.intake = Intake(self.store, self.channels, access, self.turns, workspaces, context, intake_settings,
                             limits=person_limits, agent=agent, approvals=approvals,
                             models=ModelCommand(models, self.channels, self.store))
        tools.register(message_tool(self.turns))  # after spawn: sub-agents never get it
        self._stack.push_async_callback(self.turns.aclose)
        self._stack.callback(approvals.closing)  # before the runs are cancelled
        self._stack.push_async_callback(self.intake.aclose)
        self._stack.push_async_callback(self.events.aclose)
        for name, channel in self.channels.items():
            await channel.start(self.intake.handle)
            self._stack.push_async_callback(channel.stop)
            log.info("channel started: %s", name)
        await approvals.recover()  # cards a previous process left waiting: expired
        await self.intake.recover()
