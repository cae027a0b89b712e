"""Who may talk to the bot: DM and group policies, pairing, owners, the bot-loop guard.

``Access.check(msg)`` turns one inbound message into a ``Verdict`` (DESIGN section 5):

- **DMs** follow the platform's ``dm_policy``. ``disabled``: ignored. ``open``: run.
  ``allowlist`` (the default): run when the sender is in ``allow_from`` or ``owners`` or
  was approved by pairing; anyone else gets one polite notice naming their id, at most
  once per hour (then silence). ``pairing``: the same, but a stranger gets a pairing code
  to pass to the owner (``chatgate pairing approve CODE``); when too many codes of their
  origin are pending they are told to try later (at most once per hour), and no waiting
  code is dropped for them. A code the sender was not given yet (a new one after theirs
  expired or was revoked, or once there is room again) is always sent, never issued silently.
- **Groups** follow ``group_policy``. ``disabled``: ignored. ``allowlist`` (the default):
  only chats listed in ``groups`` (``"*"`` for all). Messages in other groups get nothing
  back, not even a notice. In an allowed group a message that does not address the bot
  is kept as context (``CONTEXT``) when ``require_mention`` is on, else it runs. An
  allowed group is allowed for all its members: ``allow_from`` does not apply there
  (whoever may add people to the group decides who talks to the bot in it).
- Whether a message *addresses* the bot is the channel's call (``InboundMessage.addressed``):
  a mention, a reply to the bot or a command for it do; ``@everyone``/``@here``/``@channel``
  never do.
- A platform with no policy in the mapping (the local console, a test channel) is the
  local user's own: DMs run, groups are open with ``require_mention``, and its user is an
  owner. ``access_policies(config.channels)`` gives every real platform its policy, so a
  platform is never open by omission.
- **Bot-loop guard**: messages from another bot (``sender.is_bot``) that would get an
  answer count towards at most 20 per sliding minute per bot and chat; the 21st starts a 5-minute
  cooldown in which that bot is ignored.

Notice and guard state lives in memory: a restart may send a stranger one more notice.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from bot.agent.transcript import MAX_CONTEXT_CHARS, MAX_NAME_CHARS
from bot.channels import OfPeople
from bot.config import AccessConfig, Section
from bot.messages import ChatType, InboundMessage
from bot.pairing import CODE_TTL, MAX_PENDING, origin_of, pairing_reply
from bot.store.base import PairingStore

log = logging.getLogger(__name__)

NOTICE_INTERVAL = 3600.0  # seconds between two notices to one sender
BOT_WINDOW = 60.0  # seconds of the bot-loop guard's sliding window
BOT_MAX_EXCHANGES = 20  # answered messages per window and bot
BOT_COOLDOWN = 300.0  # seconds a looping bot is ignored
_PRUNE_AT = 4096  # tracked senders before stale entries are dropped

# The console and test channels have no policy: their one user is local and trusted.
_LOCAL = AccessConfig(dm_policy="open", group_policy="open")


class Action(StrEnum):
    RUN = "run"  # hand it to commands / the dispatcher
    IGNORE = "ignore"  # drop it, send nothing
    CONTEXT = "context"  # an allowed group message that does not address the bot: keep it as context
    PAIR = "pair"  # send ``reply`` (the pairing code), do not run
    REFUSE = "refuse"  # send ``reply`` (a polite one-line notice), do not run


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reply: str | None = None  # the text to send for PAIR and REFUSE
    reason: str = ""  # for logs


def access_policies(channels: Section) -> dict[str, AccessConfig]:
    """Every platform that has access settings, enabled or not, by platform name."""
    return {name: channel for name, channel in channels if isinstance(channel, AccessConfig)}


class Access:
    """The access policy of every platform; one instance per app."""

    def __init__(self, policies: Mapping[str, AccessConfig], store: PairingStore, *,
                 clock: Callable[[], float] = time.time, channels: Mapping[str, object] | None = None) -> None:
        self._policies = policies
        self._store = store
        self._clock = clock
        self._channels = channels if channels is not None else {}  # the running ones (OfPeople: their owners)
        self._noticed: dict[tuple[str, str], tuple[float, str]] = {}  # sender -> (when last told, code told or "")
        self._bot_windows: dict[tuple[str, str, str], deque[float]] = {}  # (platform, chat, bot)
        self._bot_cooldowns: dict[tuple[str, str, str], float] = {}  # (platform, chat, bot) -> ignored until

    def is_owner(self, msg: InboundMessage) -> bool:
        """May this sender use admin commands? Without a policy, yes (the local user), unless OfPeople say."""
        return self.is_owner_of(msg.platform, msg.sender.id)

    def is_owner_of(self, platform: str, user_id: str) -> bool:
        """``is_owner`` for a person named without a message (a scheduled job's creator)."""
        if (policy := self._policies.get(platform)) is not None:
            return user_id in policy.owners
        return c.is_owner(user_id) if isinstance(c := self._channels.get(platform), OfPeople) else True

    async def may_use(self, platform: str, chat_id: str, chat_type: ChatType, user_id: str) -> bool:
        """May ``user_id`` still use the bot in this chat? Asked without a message (a scheduled
        job runs only while its creator may): the policies as ``check`` applies them to someone
        addressing the bot, without its side effects (no pairing code, no notice, no guard)."""
        policy = self._policies.get(platform, _LOCAL)
        if chat_type is ChatType.GROUP:
            return _group(chat_id, True, policy).action is Action.RUN
        if policy.dm_policy == "disabled":
            return False
        if policy.dm_policy == "open" or user_id in policy.allow_from or user_id in policy.owners:
            return True
        return await self._store.is_approved(platform, user_id)

    async def check(self, msg: InboundMessage) -> Verdict:
        now = self._clock()
        sender = (msg.platform, msg.chat_id, msg.sender.id)  # a bot is counted per chat it talks in
        if msg.sender.is_bot and self._bot_cooling(sender, now):
            decision = Verdict(Action.IGNORE, reason="bot in cooldown")
        else:
            policy = self._policies.get(msg.platform, _LOCAL)
            if msg.chat_type is ChatType.DM:
                decision = await self._dm(msg, policy, now)
            else:
                decision = _group(msg.chat_id, msg.addressed, policy)
            if msg.sender.is_bot and decision.action in (Action.RUN, Action.PAIR, Action.REFUSE):
                decision = self._count_bot(sender, now, decision)
        log.debug("access %s:%s from %s: %s (%s)", msg.platform, msg.chat_id, msg.sender.id, decision.action,
                  decision.reason)  # fmt: skip
        return decision

    # -- DMs ---------------------------------------------------------------------------

    async def _dm(self, msg: InboundMessage, policy: AccessConfig, now: float) -> Verdict:
        mode = policy.dm_policy
        if mode == "disabled":
            return Verdict(Action.IGNORE, reason="dm disabled")
        if mode == "open":
            return Verdict(Action.RUN, reason="dm open")
        uid = msg.sender.id
        if uid in policy.allow_from or uid in policy.owners:
            return Verdict(Action.RUN, reason=f"dm {mode}: listed")
        if await self._store.is_approved(msg.platform, uid):
            return Verdict(Action.RUN, reason=f"dm {mode}: approved by pairing")
        if mode == "allowlist":
            text = (f"Sorry, I only talk to people on my allowlist. "
                    f"Your {msg.platform} id is {uid} — ask the owner to add it.")  # fmt: skip
            return self._notice(msg, now, text, "dm allowlist: not listed")
        code = await self._store.pairing_request(
            msg.platform, uid, msg.sender.name or msg.sender.username or uid, now=now, ttl=CODE_TTL,
            max_pending=MAX_PENDING, origin=origin_of(msg),
        )  # fmt: skip
        if code is None:
            text = "Sorry, I can't take new pairing requests right now; please try again later."
            return self._notice(msg, now, text, "dm pairing: too many pending")
        told_before = self._noticed.get((msg.platform, uid), (0.0, ""))[1]
        reply = pairing_reply(code.code, code.expires_at - now, replaces=bool(told_before) and told_before != code.code)
        told = self._notice(msg, now, reply, "dm pairing: code issued", code=code.code)
        return Verdict(Action.PAIR, told.reply, told.reason) if told.action is Action.REFUSE else told

    def _notice(self, msg: InboundMessage, now: float, text: str, reason: str, *, code: str = "") -> Verdict:
        """REFUSE with ``text``, unless this sender was told something within the hour; a pairing
        ``code`` they were not told yet is sent whenever (a code is never replaced silently)."""
        key = (msg.platform, msg.sender.id)
        last = self._noticed.get(key)
        if last is not None and now - last[0] < NOTICE_INTERVAL and (not code or code == last[1]):
            return Verdict(Action.IGNORE, reason=f"{reason} (already told)")
        if len(self._noticed) >= _PRUNE_AT:
            self._noticed = {k: t for k, t in self._noticed.items() if now - t[0] < NOTICE_INTERVAL}
        self._noticed[key] = (now, code)
        log.info("access %s: refused dm from %s, notice sent (%s)", msg.platform, msg.sender.id, reason)
        return Verdict(Action.REFUSE, text, reason)

    # -- the bot-loop guard ------------------------------------------------------------

    def _bot_cooling(self, bot: tuple[str, str, str], now: float) -> bool:
        until = self._bot_cooldowns.get(bot)
        if until is None:
            return False
        if now < until:
            return True
        del self._bot_cooldowns[bot]
        log.info("access %s: bot %s is heard again in chat %s after its cooldown", bot[0], bot[2], bot[1])
        return False

    def _count_bot(self, bot: tuple[str, str, str], now: float, decision: Verdict) -> Verdict:
        window = self._bot_windows.get(bot)
        if window is None:
            if len(self._bot_windows) >= _PRUNE_AT:
                self._bot_windows = {k: w for k, w in self._bot_windows.items() if w and now - w[-1] < BOT_WINDOW}
            window = self._bot_windows[bot] = deque()
        while window and now - window[0] >= BOT_WINDOW:
            window.popleft()
        if len(window) >= BOT_MAX_EXCHANGES:
            del self._bot_windows[bot]
            self._bot_cooldowns[bot] = now + BOT_COOLDOWN
            log.warning("access %s: bot %s sent more than %d messages in %.0f s in chat %s; ignoring it there "
                        "for %.0f s", bot[0], bot[2], BOT_MAX_EXCHANGES, BOT_WINDOW, bot[1], BOT_COOLDOWN)  # fmt: skip
            return Verdict(Action.IGNORE, reason="bot loop guard")
        window.append(now)
        return decision


def _group(chat_id: str, addressed: bool, policy: AccessConfig) -> Verdict:
    """A group message's verdict: the chat and whether the message addresses the bot decide, never its sender."""
    mode = policy.group_policy
    if mode == "disabled":
        return Verdict(Action.IGNORE, reason="groups disabled")
    if mode == "allowlist" and policy.group(chat_id) is None:
        return Verdict(Action.IGNORE, reason="group not allowed")
    if policy.require_mention and not addressed:
        return Verdict(Action.CONTEXT, reason=f"group {mode}: not addressed")
    return Verdict(Action.RUN, reason=f"group {mode}")


# -- group context ------------------------------------------------------------------------

ContextKey = tuple[str, str, str, str | None]  # platform, account, chat id, thread id
MAX_CONTEXT_BYTES = 16 * 1024 * 1024  # all the group context kept in memory, every chat together
MAX_CONTEXT_FILES = 20  # files named per context message
_MESSAGE_OVERHEAD = 600  # the objects around a message's text, roughly


class GroupContext:
    """The messages of allowed groups that did not address the bot, kept until it is addressed.

    ``remember`` keeps the last ``limit`` per chat and thread (and bot account); ``take``
    returns them, oldest first, and forgets them. Held in memory, and only what the prompt
    will show of them (``shown``: the text to ``MAX_CONTEXT_CHARS``, names to their cap, no
    file bytes), under a global budget of ``max_bytes`` and at most ``max_chats`` chats: over
    either, the least recently used chats lose their oldest messages first."""

    def __init__(self, limit: int = 50, *, max_chats: int = 1000, max_bytes: int = MAX_CONTEXT_BYTES) -> None:
        self._limit = limit
        self._max_chats = max_chats
        self._max_bytes = max_bytes
        self._chats: dict[ContextKey, deque[tuple[InboundMessage, int]]] = {}
        self.bytes = 0  # what the kept messages weigh (``context_size``)

    def remember(self, msg: InboundMessage) -> None:
        key = _context_key(msg)
        kept = self._chats.pop(key, None)  # re-inserted last: the dict is in order of use
        if kept is None:
            kept = deque()
            while len(self._chats) >= self._max_chats:
                self._pop(next(iter(self._chats)))
        if len(kept) >= self._limit:
            self.bytes -= kept.popleft()[1]
        small = shown(msg)
        size = context_size(small)
        kept.append((small, size))
        self.bytes += size
        self._chats[key] = kept
        while self.bytes > self._max_bytes and self._chats:
            self._drop(next(iter(self._chats)))

    def take(self, msg: InboundMessage) -> tuple[InboundMessage, ...]:
        """The context of ``msg``'s chat and thread, which is cleared. A message that opens its
        own thread (Slack: a top-level mention answered in a thread) takes the chat's too."""
        taken = self._pop(_context_key(msg))
        if msg.thread_id is not None and msg.thread_id == msg.message_id:
            taken = self._pop((msg.platform, msg.account, msg.chat_id, None)) + taken
        return taken

    def _pop(self, key: ContextKey) -> tuple[InboundMessage, ...]:
        kept = self._chats.pop(key, ())
        self.bytes -= sum(size for _, size in kept)
        return tuple(m for m, _ in kept)

    def _drop(self, key: ContextKey) -> None:
        """The chat's oldest message forgotten; an emptied chat with it."""
        kept = self._chats[key]
        self.bytes -= kept.popleft()[1]
        if not kept:
            del self._chats[key]


def shown(msg: InboundMessage) -> InboundMessage:
    """What a context message can ever show: its text cut just past ``MAX_CONTEXT_CHARS`` (so
    the cut is still marked), the names cut, no file bytes, at most ``MAX_CONTEXT_FILES`` files."""
    text = msg.text.strip()
    sender = msg.sender
    if len(sender.name) > MAX_NAME_CHARS or len(sender.username or "") > MAX_NAME_CHARS:
        sender = replace(sender, name=sender.name[:MAX_NAME_CHARS + 1],
                         username=(sender.username or "")[:MAX_NAME_CHARS + 1] or None)
    files = tuple(replace(a, name=a.name[:MAX_NAME_CHARS * 4], data=None) for a in msg.attachments[:MAX_CONTEXT_FILES])
    if len(text) <= MAX_CONTEXT_CHARS + 1 and sender is msg.sender and files == msg.attachments:
        return msg
    return replace(msg, text=text[:MAX_CONTEXT_CHARS + 1], sender=sender, attachments=files)


def context_size(msg: InboundMessage) -> int:
    """Roughly what a kept context message weighs in memory, in bytes."""
    return (_MESSAGE_OVERHEAD + len(msg.text.encode("utf-8", "surrogatepass")) + len(msg.sender.name) * 4
            + sum(len(a.name) * 4 + _MESSAGE_OVERHEAD // 2 for a in msg.attachments))


def _context_key(msg: InboundMessage) -> ContextKey:
    # A message that opens its own thread (Slack: a channel mention answered in a thread
    # under it, thread id = its own id) reads the context of where it was posted.
    thread = None if msg.thread_id == msg.message_id else msg.thread_id
    return (msg.platform, msg.account, msg.chat_id, thread)
