"""The Discord channel's gateway: its clients, their connections and their supervision.

Connection: one ``discord.Client`` with the guilds, guild-message and DM-message intents;
the privileged Message Content intent only when ``require_mention: false`` needs ambient
messages (DMs, mentions and replies to the bot carry their content without it). When the
portal refuses it (close code 4014) one line says which switch to turn on and the client
reconnects without it, still serving DMs and mentions. discord.py heals most drops itself
(resume, or identify again with its own backoff) and closes a connection after
``heartbeat_timeout`` (60 s) without a frame; ``heartbeat.watch`` applies Discord's own
zombie rule sooner (no ACK between two heartbeats: about 43 s, then a RESUME). Whatever
ends ``connect`` anyway is caught by the supervisor, which builds a new client after a backoff. Runs in flight are
not touched: REST sends do not depend on the gateway. A refused token stops the channel
with one line naming ``channels.discord.token``.

Shards (several instances): with ``shard_count``, the gateway is split as Discord splits it (a
guild's events on shard ``(guild id >> 22) % shard_count``, DMs on shard 0). Each shard this
instance runs is a client of its own with its own supervisor and zombie watch; sends and slash
commands go over REST through one more client that never connects. The shards run are those
in ``shards``, or (without it) each one whose lease ``discord:shard:<id>/<count>`` this instance
holds, taken over by another instance when it dies.

What a client hears (messages, presses, slash commands) goes to the channel's ``Events``.

Readiness (``trouble``): each connection this instance runs counts as up from its READY (or a
RESUMED) to its next disconnect; while one is down (reconnecting, or never connected yet) the
channel is not ready.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import aiohttp
import discord

from adapters.discord import endpoints, heartbeat
from adapters.discord.commands import build_tree
from adapters.discord.config import DiscordConfig
from bot.channels import SOLE, Backoff, Leases, Lifecycle, while_held
from bot.errors import ChannelError

log = logging.getLogger(__name__)

MAX_RATELIMIT_WAIT = 30.0  # discord.py waits out shorter 429s itself; longer ones go back to delivery
TOKEN_REFUSED = ("channels.discord.token: Discord refused the token (copy it again from the Developer Portal, "
                 "Bot page, into DISCORD_BOT_TOKEN)")
INTENT_REFUSED = ("channels.discord: the Message Content intent is not enabled for this bot; turn on Developer "
                  "Portal > Bot > Privileged Gateway Intents > Message Content Intent for require_mention: false. "
                  "Serving DMs and mentions without it meanwhile")


class Events(Protocol):
    """What the channel does with what a client hears."""

    async def on_message(self, message: discord.Message) -> None: ...

    async def on_press(self, interaction: discord.Interaction) -> None:
        """A click on a button (a component interaction)."""
        ...

    async def on_slash(self, interaction: discord.Interaction, name: str) -> None: ...


class Client(discord.Client):
    """discord.py's client, its events handed to the channel; ``tree`` holds the slash commands."""

    def __init__(self, gateway: Gateway, events: Events, **options: Any) -> None:
        super().__init__(**options)
        self.gateway = gateway
        self.events = events
        self.tree = build_tree(self, events.on_slash)

    async def on_connect(self) -> None:  # READY (on_ready waits ~2 s more for guilds to stream in)
        self.gateway.connected(self)

    async def on_resumed(self) -> None:
        log.info("discord: gateway session resumed")
        self.gateway.up[self.shard_id] = True

    async def on_disconnect(self) -> None:
        self.gateway.up[self.shard_id] = False

    async def on_message(self, message: discord.Message) -> None:
        await self.events.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:  # slash commands go to the tree
        if interaction.type is discord.InteractionType.component:
            await self.events.on_press(interaction)


class Gateway:
    """The clients of one channel: the REST client (which is also the connection when
    unsharded) and one client per shard run here, each kept connected by its supervisor."""

    def __init__(self, config: DiscordConfig, events: Events, life: Lifecycle, *, heartbeat_timeout: float,
                 backoff: Backoff, start_wait: float) -> None:
        self.config = config
        self.heartbeat_timeout = heartbeat_timeout  # a connection silent this long is closed and resumed
        self.backoff = backoff
        self.start_wait = start_wait  # open() returns after this even without a gateway connection
        self.connections = 0  # READYs received: sessions opened (a resume is not one)
        self.content_intent = not config.require_mention
        self.client: Client | None = None  # the REST client
        self.shard_clients: dict[int, Client] = {}  # shard id -> its gateway client now
        self.up: dict[int | None, bool] = {}  # shard id (None: unsharded) -> its connection is READY now
        self.bot_id = ""
        self.leases: Leases = SOLE
        self.stopping = False
        self._token = config.token.get_secret_value() if config.token is not None else ""
        self._events = events
        self._life = life
        self._ready = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None  # Discord's zombie rule (see heartbeat)

    async def open(self, client: Client) -> None:
        """Connect: the REST ``client`` itself when unsharded, else the shards this instance runs.
        Returns once connected, or after ``start_wait`` (a slow gateway holds up no other channel);
        raises the channel's failure when it failed meanwhile."""
        count = self.config.shard_count
        if count is None:  # one unsharded connection on the REST client itself
            self._supervisor = asyncio.create_task(self._supervise(client), name="discord gateway")
            self._watcher = asyncio.create_task(heartbeat.watch(lambda: self.client), name="discord heartbeat")
        elif self.config.shards is not None:
            for shard in self.config.shards:
                self._life.spawn(self._run_shard(shard), f"discord shard {shard}")
        else:  # by lease: whichever shards this instance can hold (all of them, alone)
            for shard in range(count):
                self._life.spawn(self._hold_shard(shard, count), f"discord shard {shard} lease")
            return
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({ready, *([self._supervisor] if self._supervisor else self._life.tasks)},
                           timeout=self.start_wait, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if (failure := self._life.failure) is not None:
            raise failure
        if not self._ready.is_set():  # the gateway is slow or down: do not hold up the other channels
            log.warning("discord: no gateway connection after %g s; still trying", self.start_wait)

    async def close(self) -> None:
        """Close every client and stop the supervisor and the zombie watch (shards end with the
        channel's tasks)."""
        self.stopping = True
        for client in (self.client, *self.shard_clients.values()):
            if client is not None:
                await client.close()
        for task in (self._watcher, self._supervisor):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def trouble(self) -> str | None:
        """None while every connection this instance runs is READY; else which are not."""
        if self.config.shard_count is None:
            return None if self.up.get(None) else "the gateway is not connected"
        shards = self.config.shards if self.config.shards is not None else sorted(self.shard_clients)
        down = [str(shard) for shard in shards if not self.up.get(shard)]
        return f"the gateway is not connected (shard {', '.join(down)})" if down else None

    def connected(self, client: discord.Client) -> None:
        endpoints.pin_resume(client, self.config.gateway_url)
        self.up[client.shard_id] = True
        self.connections += 1
        if not self._ready.is_set():
            log.info("discord: connected as %s in %d guild(s)", client.user, len(client.guilds))
        self._ready.set()

    def _fail(self, error: ChannelError) -> None:
        log.error("%s", error)
        self._life.fail(error)  # start() or wait_closed() reports it

    async def _hold_shard(self, shard: int, count: int) -> None:
        """Run ``shard`` while this instance holds its lease; wait for it again when it is lost."""
        while not self.stopping and await while_held(self.leases, f"discord:shard:{shard}/{count}",
                                                     lambda: self._run_shard(shard)):
            log.warning("discord: shard %d runs on another instance now", shard)

    async def _run_shard(self, shard: int) -> None:
        """One shard's gateway: its own client, supervisor and zombie watch."""
        client = await self.login(shard)
        watcher = asyncio.create_task(heartbeat.watch(lambda: self.shard_clients.get(shard)),
                                      name=f"discord heartbeat {shard}")
        try:
            await self._supervise(client, shard)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            gone = self.shard_clients.pop(shard, None)
            self.up.pop(shard, None)
            if gone is not None:
                await gone.close()

    def _new_client(self, shard: int | None = None) -> Client:
        intents = discord.Intents.none()
        intents.guilds = True  # channel and thread cache: where a message is
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = self.content_intent
        sharding: dict[str, int] = {} if shard is None else {"shard_id": shard,
                                                               "shard_count": self.config.shard_count or 1}
        client = Client(self, self._events, intents=intents, heartbeat_timeout=self.heartbeat_timeout,
                        max_ratelimit_timeout=MAX_RATELIMIT_WAIT, chunk_guilds_at_startup=False,
                        member_cache_flags=discord.MemberCacheFlags.none(), max_messages=None, **sharding)
        return client

    async def login(self, shard: int | None = None) -> Client:
        """A logged-in client: the REST one (which also connects when unsharded), or a shard's."""
        client = self._new_client(shard)
        try:
            await client.login(self._token)
        except discord.LoginFailure:
            await client.close()
            raise ChannelError(TOKEN_REFUSED) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            await client.close()
            raise ChannelError(f"channels.discord: cannot reach {self.config.api_base}: {exc}") from None
        assert client.user is not None
        self.bot_id = str(client.user.id)
        if shard is None:
            self.client = client
        else:
            self.shard_clients[shard] = client
        return client

    async def _supervise(self, client: discord.Client, shard: int | None = None) -> None:
        """Keep a gateway connection: discord.py reconnects by itself; this covers what it gives up on."""
        attempt = 0
        while not self.stopping:
            connections = self.connections
            try:
                await client.connect(reconnect=True)
                reason = "closed"
            except discord.PrivilegedIntentsRequired:
                log.error("%s", INTENT_REFUSED)
                self.content_intent = False
                reason, attempt = "", -1  # reconnect at once, without the intent
            except discord.ConnectionClosed as exc:
                if exc.code == 4004:
                    self._fail(ChannelError(TOKEN_REFUSED))
                    return
                reason = f"closed with code {exc.code}"
            except Exception as exc:  # noqa: BLE001 - anything that ends connect() is retried, never fatal
                # (discord.py 2.7 itself raises AttributeError when its first connection fails: it reads
                # the session of a websocket it never had)
                reason = f"{type(exc).__name__}: {exc}"
            self.up[shard] = False
            if self.stopping:
                return
            await client.close()
            attempt = 1 if self.connections > connections else attempt + 1  # it had worked: start over
            while not self.stopping:
                if attempt:
                    delay = self.backoff.delay(attempt)
                    log.warning("discord: the gateway connection ended (%s); reconnecting in %.1f s", reason, delay)
                    await asyncio.sleep(delay)
                try:
                    client = await self.login(shard)
                    break
                except ChannelError as exc:
                    if str(exc) == TOKEN_REFUSED:
                        self._fail(exc)
                        return
                    reason, attempt = str(exc), attempt + 1

