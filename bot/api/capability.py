"""The API as a capability: ``api:`` (off by default), its keys' tables, ``chatgate api key``.

Opened, it brings the ``api`` channel (``Channels``: started with the platforms', before the
intake) and serves ``api.bind``; closed, the server stops first.
"""

from __future__ import annotations

import argparse
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.api.config import ApiConfig
from bot.api.tables import MIGRATIONS
from bot.capabilities.spec import CapabilitySpec, Core
from bot.errors import ConfigError

if TYPE_CHECKING:
    from bot.api.channel import ExchangeChannel
    from bot.api.door import Door
    from bot.api.people import Person
    from bot.channels import Channel
    from bot.config.schema import CoreConfig
    from bot.conversation import Conversation


class RunningApi:
    def __init__(self, channel: ExchangeChannel, url: str, door: Door) -> None:
        self.channel, self.url, self._door = channel, url, door

    def channels(self) -> Mapping[str, Channel]:
        return {self.channel.name: self.channel}

    def start(self) -> None:
        """The bot runs (the intake recovered what was left): requests' messages are stored from now on."""
        self._door.start()


def tls_context(section: str, cert: Any, key: Any) -> ssl.SSLContext | None:
    if cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{section}.tls_cert", f"cannot load {cert} with {key}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return context


async def settle_unanswered(core: Core, platform: str) -> None:
    """What a previous process left unanswered on ``platform``: its clients are gone, nothing runs again."""
    left = [r.id for r in await core.store.unanswered() if r.message.platform == platform]
    await core.store.mark_answered(left)


def model_names(core: Core, person: Person, owner: bool) -> list[str]:
    """``chatgate`` (the agent, with the conversation's model) and each named model the person may pick."""
    from bot.routing.choice import may_pick
    from bot.routing.router import Models

    models = core.models
    names = ["chatgate"]
    if isinstance(models, Models):
        catalog = models.catalog
        names += [spec.name for spec in catalog.named
                  if any(may_pick(catalog, spec, f"{p}:{u}", owner=owner) for p, u in person.accounts)]
    return names


async def choose_model(core: Core, conversation: Conversation, name: str, person: Person) -> None:
    from bot.routing.router import Models

    models = core.models
    if not isinstance(models, Models) or (spec := models.catalog.get(name)) is None:
        return
    current = await models.chosen(conversation)
    if current is None or current.name != spec.name:
        await models.choose(conversation, spec, by=person.name)


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[RunningApi]:
    from aiohttp import web

    from bot.api.channel import ExchangeChannel
    from bot.api.door import Door
    from bot.api.people import Directory
    from bot.api.server import INFO, ApiServer
    from bot.config.binds import parse_bind
    from bot.web.serve import listen

    cfg = core.config.section("api", ApiConfig)
    door = Door(core)
    agent = core.config.agent
    channel = ExchangeChannel("api", settle=lambda platform: settle_unanswered(core, platform),
                              people=Directory(agent.id, agent.identity_links, INFO, door.owner))
    unsubscribe = core.events.subscribe(channel.on_event)
    server = ApiServer(door, channel, core.store, agent=core.config.agent.id,
                       identity_links=core.config.agent.identity_links,
                       models=lambda person, owner: model_names(core, person, owner),
                       choose=lambda conversation, name, person: choose_model(core, conversation, name, person),
                       max_bytes=cfg.max_request_kb * 1024)
    host, port = parse_bind(cfg.bind)
    runner = web.AppRunner(server.app, handler_cancellation=True, access_log=None)
    await listen(runner, host, port, key="api.bind", shown=cfg.bind, tls=tls_context("api", cfg.tls_cert, cfg.tls_key))
    try:
        scheme = "https" if cfg.tls_cert is not None else "http"
        yield RunningApi(channel, f"{scheme}://{cfg.bind}/v1", door)
    finally:
        await runner.cleanup()
        unsubscribe()


# -- chatgate api key ... ---------------------------------------------------------------


async def _keys(config: CoreConfig, args: argparse.Namespace) -> int:
    from bot.api import keys
    from bot.api.people import PERSON_HELP, person_named
    from bot.capabilities.commandline import no_database, store_of

    action = getattr(args, "action", None)
    if action is None:
        print("usage: chatgate api key create PERSON [--name NAME] | list | revoke ID", file=sys.stderr)
        return 2
    if action == "create":
        if person_named(args.person, config.agent.identity_links) is None:
            print(f"chatgate: PERSON: {args.person!r} is not {PERSON_HELP}", file=sys.stderr)
            return 2
    elif no_database(config):
        return 0
    async with store_of(config) as store:
        await store.apply_steps("api", MIGRATIONS)
        if action == "create":
            key = keys.new_key()
            key_id = await store.write(keys.add_key(args.person.strip(), args.name, key))
            print(f"key {key_id} for {args.person.strip()} ({args.name}); shown once, keep it secret:\n{key}")
            return 0
        if action == "list":
            found = await store.read(keys.all_keys())
            for k in found:
                state = "revoked " + _day(k.revoked_at) if k.revoked_at is not None else "active"
                print(f"{k.id:>4}  {k.person:<24} {k.name:<20} …{k.hint}  created {_day(k.created_at)}  {state}")
            if not found:
                print("no keys")
            return 0
        if not await store.write(keys.revoke(args.id)):
            print(f"chatgate: no active key {args.id}; see `chatgate api key list`", file=sys.stderr)
            return 1
        print(f"revoked key {args.id}")
        return 0


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    api = sub.add_parser("api", help="the OpenAI-compatible API: its keys")
    api.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    api.set_defaults(run=_keys)
    what = api.add_subparsers(dest="what")
    key = what.add_parser("key", help="keys: create, list, revoke")
    key.add_argument("-c", "--config", default=argparse.SUPPRESS, help="path to config.yaml")
    actions = key.add_subparsers(dest="action")
    create = actions.add_parser("create", help="a key for PERSON, shown once (only its hash is stored)")
    create.add_argument("person", metavar="PERSON", help="a person of agent.identity_links, or platform:user_id")
    create.add_argument("--name", default="key", help="what the key is for (Open WebUI, a script)")
    listing = actions.add_parser("list", help="every key: id, person, name, last four characters, state")
    revoke = actions.add_parser("revoke", help="revoke a key by its id (as `list` shows it)")
    revoke.add_argument("id", type=int)
    for parser in (create, listing, revoke):
        parser.add_argument("-c", "--config", default=argparse.SUPPRESS, help="path to config.yaml")


SPEC = CapabilitySpec("api", _open, config=ApiConfig, cli=_cli, migrations=MIGRATIONS, channels=("api",),
                      enabled=lambda config: config.section("api", ApiConfig).enabled)
