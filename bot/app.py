"""The running application: store, provider, agent, intake, turns and channels, as one lifecycle.

Entering (``async with App(config, channels) as app``) opens everything in order and, if any
step fails, closes what was opened; leaving stops the channels first (no new input), cancels
runs, then closes the provider and the store.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.access import Access, GroupContext, access_policies
from bot.agent.compaction import CompactionSettings
from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, PostRunHook
from bot.agent.prompt import channel_info
from bot.agent.spawn import SubAgents, spawn_tool
from bot.capabilities import Channels, Core, Recovers, Starts, Stops, Tools
from bot.capabilities import registry as capability_registry
from bot.channels import SOLE, Channel, LastHeard, RecallsInbound, ReportsUndelivered, UsesLeases, spelling
from bot.delivery import Delivery, DeliverySettings
from bot.errors import ConfigError
from bot.intake import Intake, IntakeSettings
from bot.limits import LimitSettings, PersonLimits, limit_keys
from bot.routing.config import open_models
from bot.runs import QueueMode, RunCaps
from bot.session_keys import person_of
from bot.settings import Config
from bot.stages import Speaks
from bot.store import AppStore, store_for
from bot.tools import policy_for, registry_from_config
from bot.tools.approval import ApprovalRules
from bot.tools.gate import ToolGate
from bot.tools.message import message_tool
from bot.tools.send_file import send_file_tool
from bot.tools.toolset import Toolset
from bot.tracing import Redactor
from bot.turns import Turns
from bot.workspace import Workspaces

if TYPE_CHECKING:
    from bot.peers import Joined

log = logging.getLogger(__name__)

# The templates that ship with chatgate: workspaces/templates/ beside the bot package.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent.parent / "workspaces" / "templates"


class App:
    def __init__(self, config: Config, channels: Mapping[str, Channel]) -> None:
        self.config = config
        self.channels = dict(channels)
        self.events = EventBus()
        self.capabilities: dict[str, Any] = {}  # the running capabilities by name (bot.capabilities.registry)
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
        writable(cfg.workspace.root)
        opened = store_for(cfg.storage.path, cfg.storage.database_url, pool_size=cfg.storage.pool_size,
                           backups=cfg.storage.backups)
        self.store: AppStore = await self._stack.enter_async_context(opened)
        cluster = await self._join()
        models = await open_models(cfg, self.store)  # the providers of every model in use
        self._stack.push_async_callback(models.aclose)
        default = models.default.route
        provider, cost = default.provider, default.cost
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
        person_limits = PersonLimits(LimitSettings(lim.messages_per_minute, lim.daily_tokens, lim.daily_cost_usd,
                                                   lim.audio_minutes_per_day, lim.bot_daily_tokens,
                                                   lim.bot_daily_cost_usd), self.store, shared=cluster)
        meter = person_limits.charge if person_limits.active else None
        policies = access_policies(cfg.channels)
        gate = ToolGate(holds=cluster)  # capabilities add their steps (hooks, approvals)
        toolsets: list[Toolset] = []  # capabilities add theirs as they open (MCP), before any run
        sandbox = cfg.exec_settings()
        tools = registry_from_config(cfg.tools, sandbox)
        tools.register(spawn_tool(SubAgents(settings, provider, self.store, tools, workspaces, cost, redactor,
                                            meter=meter, toolsets=toolsets, gate=gate, models=models)))
        post_run: list[PostRunHook] = []  # capabilities add theirs as they open (titles), before any run
        agent = Agent(settings, provider, self.store, self.events, tools, workspaces, cost, redactor, meter=meter,
                      toolsets=toolsets, gate=gate, models=models, post_run=post_run)
        r = cfg.runs
        caps = RunCaps(r.max_concurrent, r.max_per_group, QueueMode(r.queue_mode), r.debounce_ms / 1000,
                           r.max_queued)
        downloads = cfg.max_download_bytes()
        self.delivery = Delivery(self.store, self.channels, DeliverySettings(retry_for=cfg.delivery.retry_for),
                                 claim=cluster.claim_answer if cluster is not None else None)
        access = Access(policies, self.store, channels=self.channels)
        context = GroupContext()
        channel_infos = {name: channel_info(name) for name in self.channels}
        intake_settings = IntakeSettings(a.id, a.dm_scope, a.identity_links, cfg.workspace.group_scope, channel_infos,
                                         r.recover_max_age, downloads, cfg.storage.retention.context * 86400)
        keys = lambda msg: limit_keys(msg, person_of(msg.platform, msg.sender.id, a.identity_links),  # noqa: E731
                                      self.channels.get(msg.platform))
        policy_of = lambda conv, owner: policy_for(  # noqa: E731
            cfg.tools, policies.get(conv.platform), platform=conv.platform, chat_type=conv.chat_type.value,
            chat_id=conv.chat_id, is_owner=owner)
        self.turns = Turns(
            agent, self.store, self.events, self.channels, self.delivery, context, caps=caps,
            is_owner=access.is_owner, keys=keys, person_limits=person_limits,
            policy=policy_of, peers=cluster)
        core = Core(cfg, self.store, self.channels, self.events, workspaces, access, person_limits, self.turns,
                    models, gate, ApprovalRules(tuple(cfg.tools.approval.items())), policy_of, tools.get,
                    lambda platform: spelling(self.channels.get(platform)),
                    lambda platform, user_id: person_of(platform, user_id, a.identity_links), toolsets, channel_infos,
                    cluster.add_sweep if cluster is not None else lambda sweep: None,
                    sandbox=sandbox, running=self.capabilities,
                    peers=cluster, post_run=post_run)
        for capability_spec in capability_registry.specs():  # each enabled one, opened in order, closed in reverse
            if capability_spec.enabled(cfg):
                if capability_spec.migrations:  # its own tables, before it opens
                    await self.store.apply_steps(capability_spec.name, capability_spec.migrations)
                self.capabilities[capability_spec.name] = await self._stack.enter_async_context(
                    capability_spec.open(core))
                if isinstance(opened := self.capabilities[capability_spec.name], Channels):
                    self.channels.update(opened.channels())  # the dict every part holds: started below
        for speaking in (s for c in self.capabilities.values()
                         if isinstance(c, Speaks) and (s := c.speaking()) is not None):
            self.turns.speak_with(speaking)
        self.intake = Intake(self.store, self.channels, access, self.turns, workspaces, context, intake_settings,
                             limits=person_limits, keys=keys, agent=agent, capabilities=self.capabilities,
                             peers=cluster)
        tools.register(message_tool(self.turns))  # after spawn: sub-agents never get these
        tools.register(send_file_tool(self.turns))
        for capability in self.capabilities.values():
            if isinstance(capability, Tools):
                for tool in capability.tools():
                    tools.register(tool)
        if cluster is not None:  # it leaves when its context closes, after the runs were cancelled
            await cluster.start(self.intake)
        self._stack.push_async_callback(self.turns.aclose)
        self._stack.push_async_callback(self.intake.aclose)
        self._stack.push_async_callback(self.events.aclose)
        for name, channel in self.channels.items():
            if isinstance(channel, UsesLeases):
                channel.use_leases(cluster if cluster is not None else SOLE)
            if isinstance(channel, RecallsInbound):
                channel.recall_inbound(_last_heard(self.store, name))
            if isinstance(channel, ReportsUndelivered):
                channel.report_undelivered(partial(self.delivery.undelivered, name))
            await channel.start(self.intake.handle)
            self._stack.push_async_callback(channel.stop)
            log.info("channel started: %s", name)
        for capability in self.capabilities.values():
            if isinstance(capability, Recovers):
                await capability.recover()  # what a previous process left: an approval's card, expired
        await self.intake.recover()
        for capability in self.capabilities.values():  # once the channels listen and what was owed went out
            if isinstance(capability, Stops):
                self._stack.push_async_callback(capability.stop)  # the first to stop: nothing starts after
            if isinstance(capability, Starts):
                capability.start()

    async def _join(self) -> Joined | None:
        """This instance joined to the others on its database by the capability that joins them
        (the cluster's, on PostgreSQL): not started yet; None alone."""
        for spec in capability_registry.specs():
            if spec.join is not None and spec.enabled(self.config):
                return await self._stack.enter_async_context(spec.join(self.config, self.store))
        return None


def writable(root: Path) -> None:
    """``workspace.root`` must take files (several instances: a filesystem they all share); one line when not."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".chatgate-check-"):
            pass
    except OSError as exc:
        raise ConfigError("workspace.root", f"{root} is not writable ({exc.strerror or exc})",
                          "give the bot a folder it can write; several instances need one they all share") from None


def _last_heard(store: AppStore, platform: str) -> LastHeard:
    """When a chat of ``platform`` last heard its person, read from the store (``RecallsInbound``)."""
    from bot.store.inbound import last_heard

    return lambda account, chat_id: store.read(last_heard(platform, account, chat_id))
