"""The cluster capability: several instances of one bot on one PostgreSQL database (DESIGN
section 14), enabled whenever ``storage.url`` names one.

It joins before the core is built (``join``), because the core's parts need it from their
start: the store claims scheduled occurrences as this instance and commits a turn only while
its lane is held here, delivery sends an answer only when it claimed it, the per-person rate is
one bucket in the database, the channels hold their pollers and shards by lease, and the intake
and the turn runner hand sessions over (``bot.peers.Joined``). Once the core is built nothing
more of it opens. It brings ``chatgate status`` and its own tables (``postgres``), which
``chatgate migrate`` makes with the store's.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core

if TYPE_CHECKING:
    from bot.cluster.node import Cluster
    from bot.config.schema import CoreConfig
    from bot.settings import Config
    from bot.store import AppStore
    from bot.store.pg.base import Connection


@asynccontextmanager
async def join(config: CoreConfig, store: AppStore) -> AsyncIterator[Cluster]:
    """This instance in the cluster of every instance on the same database: not started yet (the
    app starts it once the intake can take what others hand over); left when the app closes."""
    from bot.cluster.node import Cluster, ClusterSettings, default_instance
    from bot.store.pg import PostgresStore

    url = config.storage.database_url
    assert isinstance(store, PostgresStore) and url is not None, "the cluster runs on PostgreSQL only"
    c = config.cluster
    settings = ClusterSettings(c.instance or default_instance(), c.lease_seconds)
    store.claim_as(settings.instance, settings.lease_seconds)  # what it claims in the database names it
    cluster = Cluster(store.pool, url, settings)
    store.fence_with(cluster.fence)  # a turn commits only while its lane is still held here
    try:
        yield cluster
    finally:
        await cluster.aclose()  # after the runs were cancelled: nobody takes a session still running here


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[None]:
    yield None  # everything was given by ``join``


async def _tables(conn: Connection) -> int:
    from bot.cluster import schema

    return await schema.apply(conn)


async def _status(config: Config, args: argparse.Namespace) -> int:
    from bot.cluster.status import format_status, read_status
    from bot.store.pg import PostgresStore

    url = config.storage.database_url
    if url is None:
        print(f"one instance on SQLite ({config.storage.path}); several instances share a PostgreSQL database: "
              "set storage.url")
        return 0
    async with PostgresStore(url, pool_size=2) as store:
        print(format_status(await read_status(store.pool, config.cluster.lease_seconds), config.storage.shown))
    return 0


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    status = sub.add_parser("status", help="the instances alive on the PostgreSQL database, what each owns, lag")
    status.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else environment)")
    status.set_defaults(run=_status)


SPEC = CapabilitySpec("cluster", _open, enabled=lambda config: config.storage.database_url is not None,
                      join=join, postgres=_tables, cli=_cli)
