"""The web chat as a capability: ``webchat:`` (off by default), its sign-in links' table,
``chatgate webchat invite PERSON``. Opened, it brings the ``webchat`` channel and serves
``webchat.bind``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.api.webchat.config import WebchatConfig
from bot.api.webchat.invites import MIGRATIONS
from bot.capabilities.spec import CapabilitySpec, Core

if TYPE_CHECKING:
    from bot.api.door import Door
    from bot.api.webchat.channel import WebChannel
    from bot.channels import Channel
    from bot.config.schema import CoreConfig


class RunningWebchat:
    def __init__(self, channel: WebChannel, url: str, door: Door) -> None:
        self.channel, self.url, self._door = channel, url, door

    def channels(self) -> Mapping[str, Channel]:
        return {self.channel.name: self.channel}

    def start(self) -> None:
        """The bot runs (the intake recovered what was left): messages are stored from now on."""
        self._door.start()


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[RunningWebchat]:
    from aiohttp import web

    from bot.api.capability import RunningApi, settle_unanswered, tls_context
    from bot.api.door import Door
    from bot.api.people import Directory
    from bot.api.webchat import invites
    from bot.api.webchat.channel import WebChannel
    from bot.api.webchat.server import INFO, WebchatServer
    from bot.config.binds import parse_bind
    from bot.web.serve import listen

    cfg, agent = core.config.section("webchat", WebchatConfig), core.config.agent
    door = Door(core)
    channel = WebChannel(settle=lambda platform: settle_unanswered(core, platform),
                         people=Directory(agent.id, agent.identity_links, INFO, door.owner),
                         log=lambda thread, role, body: core.store.write(invites.said(thread, role, body)))
    api = core.running.get("api")  # opened before: its runs' questions are shown here too
    server = WebchatServer(cfg, door, channel, core.store, agent=agent.id, identity_links=agent.identity_links,
                           workspaces=core.workspaces, say=lambda platform, answer_id, target, text:
                           core.turns.outbox.say(platform, answer_id, target, text), running=lambda: core.channels,
                           api=api.channel if isinstance(api, RunningApi) else None,
                           approvers=core.config.tools.approvers)
    unsubscribe = core.events.subscribe(channel.on_event)
    heard = core.events.subscribe(server.on_event)
    host, port = parse_bind(cfg.bind)
    runner = web.AppRunner(server.app, access_log=None)
    await listen(runner, host, port, key="webchat.bind", shown=cfg.bind,
                 tls=tls_context("webchat", cfg.tls_cert, cfg.tls_key))
    try:
        yield RunningWebchat(channel, cfg.url, door)
    finally:
        await runner.cleanup()
        heard()
        unsubscribe()
        await server.aclose()


async def _invite(config: CoreConfig, args: argparse.Namespace) -> int:
    from bot.api.people import PERSON_HELP, person_named
    from bot.api.webchat import invites
    from bot.capabilities.commandline import store_of

    if getattr(args, "action", None) != "invite":
        print("usage: chatgate webchat invite PERSON", file=sys.stderr)
        return 2
    person = person_named(args.person, config.agent.identity_links)
    if person is None:
        print(f"chatgate: PERSON: {args.person!r} is not {PERSON_HELP}", file=sys.stderr)
        return 2
    cfg = config.section("webchat", WebchatConfig)
    token = invites.new_token()
    async with store_of(config) as store:
        await store.apply_steps("webchat", MIGRATIONS)
        await store.write(invites.add(token, person.name, cfg.invite_hours * 3600))
    print(f"a sign-in link for {person.name}, working once within {cfg.invite_hours:g} h:\n{cfg.url}/signin?t={token}")
    return 0


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    webchat = sub.add_parser("webchat", help="the web chat: sign-in links")
    webchat.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    webchat.set_defaults(run=_invite)
    actions = webchat.add_subparsers(dest="action")
    invite = actions.add_parser("invite", help="a one-time sign-in link for PERSON")
    invite.add_argument("person", metavar="PERSON", help="a person of agent.identity_links, or platform:user_id")
    invite.add_argument("-c", "--config", default=argparse.SUPPRESS, help="path to config.yaml")


SPEC = CapabilitySpec("webchat", _open, config=WebchatConfig, cli=_cli, migrations=MIGRATIONS, channels=("webchat",),
                      enabled=lambda config: config.section("webchat", WebchatConfig).enabled)
