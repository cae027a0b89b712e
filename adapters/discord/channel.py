"""The Discord channel on discord.py 2: a supervised gateway in, REST sends out.

Connection and shards: ``gateway`` (one client, or one per shard this instance runs, each
kept connected by its supervisor and Discord's zombie rule); what they hear comes here.

Outbound: chunks arrive rendered and split by the core. Every send carries
``allowed_mentions`` that ping nobody but the person replied to; in guild channels the first
chunk replies to the triggering message; threads are sent to as channels. A slash command
is deferred at once and its answer edits the deferred reply. discord.py's own 429 handling
(Retry-After, buckets) is kept up to 30 s; a longer wait, a 5xx it gave up on or a network
error is a ``SendFailed`` delivery retries; a malformed or forbidden send is permanent.

Questions (``Asks``, see ``presses``): ``ask`` sends buttons whose custom id is the choice's
id; a press on any button of the bot's messages (this process's or an earlier one's) is
deferred at once and handed to the inbox; ``answer_press`` is an ephemeral follow-up,
``close_question`` edits the message and removes its components.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import discord

from adapters.discord import endpoints
from adapters.discord.commands import sync
from adapters.discord.config import DiscordConfig, group_allowed
from adapters.discord.dialect import DISCORD
from adapters.discord.dialect import SHAPE as DIALECT_SHAPE
from adapters.discord.gateway import TOKEN_REFUSED, Gateway
from adapters.discord.inbound import PLATFORM, Facts, Where, facts_of, press_of, to_inbound, where_of
from adapters.discord.presses import Held, layout
from bot.channels import Backoff, Choice, Dialect, Inbox, Leases, Lifecycle, SendFailed, Status, Streaming, Target
from bot.messages import Attachment, ChatType, InboundMessage, Sender

__all__ = ["SHAPE", "TOKEN_REFUSED", "DiscordChannel"]  # TOKEN_REFUSED is the gateway's, named here as before

log = logging.getLogger(__name__)

# The dialect's 2,000 characters and 17 lines; typing lasts ~10 s on Discord, so refresh every 8.
UPLOAD_LIMIT = 10 * 1024 * 1024  # what a bot may attach in a server without boosts
SHAPE = replace(DIALECT_SHAPE, status_every=8.0, max_upload=UPLOAD_LIMIT)
# The model may write @everyone or <@id>: nobody is pinged but the person a reply answers.
QUIET = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)
INBOUND_AT_ONCE = 64
STORE_GRACE = 5.0  # seconds stop() lets messages being handed to the inbox finish
_PERMANENT_CODES = {50035, 50006, 50007, 50013, 50001, 10003, 10008, 10013}


@dataclass(slots=True)
class _Deferred:
    """A slash command deferred on Discord, waiting for the core's answer."""

    interaction: discord.Interaction
    expiry: asyncio.TimerHandle | None = None


class DiscordChannel:
    name = PLATFORM
    shape = SHAPE

    def __init__(self, config: DiscordConfig, dialect: Dialect = DISCORD, *, heartbeat_timeout: float = 60.0,
                 answer_wait: float = 60.0, backoff: Backoff = Backoff(1.0, 2.0, 60.0),
                 start_wait: float = 30.0) -> None:
        self.config = config
        self.dialect = dialect
        self.streaming: Streaming = config.streaming  # read by the core's progress: "edit" edits one draft
        self.answer_wait = answer_wait  # a deferred slash command nobody answers is withdrawn after this
        self.commands_written = 0  # bulk overwrites of the slash commands by this process
        self._inbox: Inbox | None = None
        self._life = Lifecycle()
        self.gateway = Gateway(config, self, self._life, heartbeat_timeout=heartbeat_timeout, backoff=backoff,
                               start_wait=start_wait)
        self._stopping = False
        self._inbound = asyncio.Semaphore(INBOUND_AT_ONCE)
        self._deferred: dict[str, _Deferred] = {}
        self._held = Held()  # presses waiting for the core's answer
        self._threads: dict[int, Any] = {}  # channels learnt over REST (threads the cache missed)
        self._files: aiohttp.ClientSession | None = None

    def use_leases(self, leases: Leases) -> None:
        self.gateway.leases = leases

    @property
    def client(self) -> discord.Client | None:
        """The REST client (also the gateway connection when unsharded)."""
        return self.gateway.client

    @property
    def shard_clients(self) -> Mapping[int, discord.Client]:
        """Shard id -> its gateway client now."""
        return self.gateway.shard_clients

    @property
    def connections(self) -> int:
        """READYs received: sessions opened (a resume is not one)."""
        return self.gateway.connections

    @property
    def content_intent(self) -> bool:
        return self.gateway.content_intent

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._life.open()
        endpoints.apply(self.config.api_base, self.config.gateway_url)
        self._files = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300, sock_connect=10))
        client = await self.gateway.login()
        try:
            if await sync(client, client.tree):
                self.commands_written += 1
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("discord: could not sync slash commands (%s); text commands still work", exc)
        await self.gateway.open(client)

    async def stop(self) -> None:
        self._stopping = True
        for pending in self._deferred.values():
            if pending.expiry is not None:
                pending.expiry.cancel()
        self._deferred.clear()
        await self.gateway.close()
        # messages being stored get a grace: the gateway will not send them again
        await self._life.stop_tasks(grace=STORE_GRACE)
        if self._files is not None:
            await self._files.close()
        self._life.close()

    async def wait_closed(self) -> None:
        await self._life.wait()

    def trouble(self) -> str | None:
        """Readiness (``Connects``): None while the gateway connections this instance runs are READY."""
        return self.gateway.trouble()

    # -- inbound -----------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        if str(message.author.id) == self.gateway.bot_id:
            return
        facts = facts_of(message)
        if facts.guild_id is not None and (facts.where is None or (facts.where is Where.THREAD
                                                                    and facts.parent_id is None)):
            channel = await self._channel(message.channel.id)  # a thread the cache did not know
            if channel is None:
                return
            facts = facts_of(message, channel)
        if facts.guild_id is not None and not group_allowed(self.config, facts.guild_id, facts.channel_id,
                                                            facts.parent_id):
            log.debug("discord: ignored a message in channel %s of guild %s (not allowed)", facts.channel_id,
                      facts.guild_id)
            return
        msg = to_inbound(facts, self.gateway.bot_id, allow_bots=self.config.allow_bots)
        if msg is not None:
            await self._take(msg)

    async def _channel(self, channel_id: int) -> Any | None:
        if channel_id not in self._threads:
            assert self.client is not None
            try:
                self._threads[channel_id] = await self.client.fetch_channel(channel_id)
            except discord.HTTPException as exc:
                log.warning("discord: cannot see channel %s (%s); message ignored", channel_id, exc)
                return None
            if len(self._threads) > 1000:
                self._threads.pop(next(iter(self._threads)))
        return self._threads[channel_id]

    async def _take(self, msg: InboundMessage) -> None:
        assert self._inbox is not None
        # discord.py runs each event in a task it does not keep: own it, so stop() waits for it.
        task = asyncio.current_task()
        if task is not None:
            self._life.own(task)
        if self._stopping:
            return
        async with self._inbound:
            try:
                await self._inbox(msg)
            except Exception:
                # The gateway never redelivers: say so loudly, with the ids to find the message.
                log.exception("discord: could not store message %s in chat %s", msg.message_id, msg.chat_id)

    def _facts(self, interaction: discord.Interaction, content: str) -> Facts | None:
        """The facts of an interaction (a slash command, a press) with ``content``; None outside
        the chats the bot serves."""
        channel = interaction.channel
        guild = str(interaction.guild_id) if interaction.guild_id else None
        kind = getattr(getattr(channel, "type", None), "value", None)
        where = where_of(kind if guild or kind is not None else 1, guild is not None)
        raw_parent = getattr(channel, "parent_id", None)
        parent = str(raw_parent) if raw_parent else None
        channel_id = str(interaction.channel_id)
        if where is None or (guild is not None and not group_allowed(self.config, guild, channel_id, parent)):
            return None
        user = interaction.user
        return Facts(str(interaction.id), channel_id, where,
                     Sender(str(user.id), user.display_name, user.name, bool(user.bot)), content, guild, parent,
                     timestamp=interaction.created_at.timestamp())

    async def on_slash(self, interaction: discord.Interaction, name: str) -> None:
        facts = self._facts(interaction, f"/{name}")
        if facts is None:
            return  # not a chat we serve: no answer of any kind (Discord tells the user it failed)
        await interaction.response.defer(thinking=True)  # first: Discord's 3 s
        msg = to_inbound(facts, self.gateway.bot_id, allow_bots=True)
        if msg is None:
            return
        pending = self._deferred[msg.message_id] = _Deferred(interaction)
        pending.expiry = asyncio.get_running_loop().call_later(self.answer_wait, self._withdraw, msg.message_id)
        await self._take(msg)

    async def on_press(self, interaction: discord.Interaction) -> None:
        """A click on a button of one of the bot's messages (see ``presses``)."""
        data: Mapping[str, object] = interaction.data or {}
        question = interaction.message
        if question is None or str(question.author.id) != self.gateway.bot_id or data.get("component_type") != 2:
            return
        facts = self._facts(interaction, str(data.get("custom_id") or ""))
        msg = press_of(facts, self.gateway.bot_id, str(question.id)) if facts is not None else None
        if msg is None:
            return
        try:
            await interaction.response.defer()  # first: Discord's 3 s; the message stays as it is
        except (discord.HTTPException, discord.InteractionResponded, aiohttp.ClientError, OSError) as exc:
            log.info("discord: deferring press %s failed (%s); handing it over all the same", msg.message_id, exc)
        self._held.keep(msg.message_id, interaction)
        await self._take(msg)

    def _withdraw(self, interaction_id: str) -> None:
        """Nobody answered a deferred slash command: remove its "thinking…" reply."""
        pending = self._deferred.pop(interaction_id, None)
        if pending is not None:
            self._life.spawn(_quietly(pending.interaction.delete_original_response()))

    # -- outbound ----------------------------------------------------------------------

    def _where(self, to: Target) -> discord.PartialMessageable:
        if self.client is None:
            raise SendFailed("discord: not connected yet")
        return self.client.get_partial_messageable(int(to.thread_id or to.chat_id))

    def _reference(self, to: Target, dest: discord.PartialMessageable) -> discord.MessageReference | None:
        """``reference=`` for a send: a reply to the triggering message in groups, else None (no
        ``reference`` passed)."""
        if to.chat_type is ChatType.GROUP and to.reply_to and to.reply_to.isdigit():
            return discord.MessageReference(message_id=int(to.reply_to), channel_id=dest.id, fail_if_not_exists=False)
        return None

    async def send(self, to: Target, text: str) -> str:
        pending = self._deferred.get(to.reply_to) if to.reply_to else None
        if pending is not None:
            sent = await _attempt(pending.interaction.edit_original_response(content=text, allowed_mentions=QUIET))
            self._settle(to.reply_to)
            return str(sent.id)
        return await self._post(to, text)

    async def _post(self, to: Target, text: str, **extra: Any) -> str:
        """A new message in ``to``'s channel or thread, a reply to the trigger in groups."""
        dest = self._where(to)
        reference = self._reference(to, dest)
        if reference is not None:
            extra["reference"] = reference
        sent = await _attempt(dest.send(text, allowed_mentions=QUIET, **extra))
        return str(sent.id)

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        return await self._post(to, text, view=layout(choices))

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        interaction = self._held.take(press.message_id)
        if interaction is None or not text:
            return
        try:
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=QUIET)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.info("discord: the answer to press %s did not reach %s: %s", press.message_id, press.sender.id, exc)

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        dest = self._where(to)
        await _attempt(dest.get_partial_message(int(question_id)).edit(content=text, view=None,
                                                                        allowed_mentions=QUIET))

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        dest = self._where(to)
        await _attempt(dest.get_partial_message(int(message_id)).edit(content=text, allowed_mentions=QUIET))

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        file = discord.File(io.BytesIO(data), filename=name)
        pending = self._deferred.get(to.reply_to) if to.reply_to else None
        if pending is not None:
            sent = await _attempt(pending.interaction.edit_original_response(
                content=caption, attachments=[file], allowed_mentions=QUIET))
            self._settle(to.reply_to)
            return str(sent.id)
        return await self._post(to, caption, file=file)

    def names(self) -> tuple[str, ...]:
        """The bot's user name and display name, for a voice message that calls it by name (``Named``)."""
        user = self.client.user if self.client is not None else None
        if user is None:
            return ()
        return tuple(dict.fromkeys(n for n in (user.name, getattr(user, "global_name", None), user.display_name) if n))

    def _settle(self, interaction_id: str | None) -> None:
        pending = self._deferred.pop(interaction_id or "", None)
        if pending is not None and pending.expiry is not None:
            pending.expiry.cancel()

    async def status(self, to: Target, status: Status) -> None:
        """Typing while WORKING (Discord shows it ~10 s; progress refreshes it every ``status_every``).
        Discord has no call to stop typing: it ends with the bot's next message or when it expires."""
        if status is not Status.WORKING or (to.reply_to and to.reply_to in self._deferred):
            return  # a deferred slash command already shows "thinking…"
        try:
            dest = self._where(to)
            assert self.client is not None
            # Bounded: discord.py retries a 5xx for ~25 s, and a late "typing…" is worse than none.
            async with asyncio.timeout(self.shape.status_every):
                await _attempt(self.client.http.send_typing(dest.id))
        except (SendFailed, TimeoutError) as exc:
            log.debug("discord: typing failed in %s: %s", to.chat_id, exc)

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        if attachment.size is not None and attachment.size > limit:
            raise SendFailed(f"{attachment.name} is {attachment.size} bytes, over {limit}", permanent=True)
        if self._files is None or not attachment.platform_file_id:
            raise SendFailed(f"{attachment.name}: nothing to download", permanent=True)
        data = bytearray()
        try:
            async with self._files.get(attachment.platform_file_id) as response:
                if response.status >= 400:
                    raise SendFailed(f"{attachment.name}: HTTP {response.status}",
                                     permanent=response.status in (403, 404))
                async for block in response.content.iter_chunked(65536):
                    data += block
                    if len(data) > limit:
                        raise SendFailed(f"{attachment.name} is over {limit} bytes", permanent=True)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendFailed(f"{attachment.name}: {type(exc).__name__}: {exc}") from None
        return bytes(data)


async def _attempt(call: Any) -> Any:
    """One send: discord.py's result, or ``SendFailed`` saying whether a retry can help."""
    try:
        return await call
    except discord.RateLimited as exc:
        raise SendFailed(f"discord: rate limited for {exc.retry_after:.0f} s", retry_after=exc.retry_after) from None
    except discord.DiscordServerError as exc:
        raise SendFailed(f"discord: {exc.status} {exc.text}") from None
    except discord.HTTPException as exc:
        if exc.status == 429:  # a 429 discord.py does not wait out (no Via header: Cloudflare)
            raise SendFailed("discord: 429 from the edge", retry_after=5.0) from None
        permanent = exc.code in _PERMANENT_CODES or 400 <= exc.status < 500
        raise SendFailed(f"discord: {exc.status} (code {exc.code}) {exc.text}", permanent=permanent) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise SendFailed(f"discord: {type(exc).__name__}: {exc}") from None


async def _quietly(call: Any) -> None:
    try:
        await call
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        log.debug("discord: withdrawing a deferred reply failed: %s", exc)
