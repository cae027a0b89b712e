"""One instance in the cluster: its row and heartbeat, the session lanes it owns, hand-overs,
stops that cross instances, and taking over what a dead instance left.

- A session's lane is the lease ``session:<key>``. ``claim`` takes it for a stored message
  (and with it every message of the session still waiting, oldest first); when another
  instance holds it, that one is told (NOTIFY ``pull``, the message in it when it fits, else read
  from the store);
  for a beat after, the conversation's next messages go to that holder without asking the
  database again (were it to have given the lane up meanwhile, it takes the lane back on
  ``pull``; were it to have died, the sweep takes the session over as it would anyway).
  ``idle`` marks the lane idle; the lease is given back by the first heartbeat at least a beat
  later (``_give_back``), so that the next message of a conversation finds its lane held and
  costs no lease statement. Another instance that asks for an idle lane gets it at once: a
  message it stored is handed over (``pull``) and run here as if the lane were busy; ``own``
  (a scheduled turn) asks the holder to give the lane back (``giveback``) and takes it.
- The heartbeat (every third of ``lease_seconds``) marks the instance seen and renews all it
  holds; a lease found lost (another instance holds it) ends the lane here (``Host.abandon``).
- The sweep, after each heartbeat, takes sessions whose messages wait with no live holder
  (their instance died or stopped) and answers nobody is sending, so that a dead instance's
  work is done once, by one other instance, a lease's time after its last heartbeat.
- ``stop`` asks the holder of a session's lane (NOTIFY, answered by NOTIFY).
- Fencing: an instance paused past its lease (a VM freeze, a long GC) may wake up in the middle
  of a turn another instance has taken over. The store commits a turn only under ``fence``
  (the lane's lease still held by this instance with the token it was taken with, checked and
  its row locked in the commit's transaction, so that a take-over waits for the commit; see
  ``bot.cluster.leases``), and ``still_holds`` is the tool gate's check before a tool with side
  effects: one primary-key read of the lease, unexpired.

Other work that one instance claims and another must take over when it dies (a scheduled
job's occurrence, ...) plugs in with ``add_sweep``: its function runs after every heartbeat's
sweep, and re-claims rows whose claimer is no longer alive (``bot.store.pg.sql.alive(column)`` is the SQL
condition: the instance named in ``column`` has a heartbeat within a lease's time), claiming
with ``SELECT ... FOR UPDATE SKIP LOCKED`` so that two sweeping instances never take one row.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, replace

import asyncpg

from bot import observe
from bot.channels import Held
from bot.cluster import rates, schema, work
from bot.cluster.asking import ALIVE_OTHERS, Asking
from bot.cluster.bus import Bus, Message
from bot.cluster.leases import LeaseRows
from bot.messages import Answer, InboundMessage
from bot.observe import Signal
from bot.peers import Host, Responder, Stopped, Waiting
from bot.session_keys import parse_key
from bot.store.base import InboundRecord
from bot.store.inbound import inbound_from_json, inbound_to_json
from bot.store.pg.history import Fence
from bot.store.pg.sql import NOW
from bot.tasks import OwnedTasks

log = logging.getLogger(__name__)

_REGISTER = (f"INSERT INTO cluster_instances (id, host, pid, started_at, seen_at) VALUES ($1, $2, $3, {NOW}, {NOW})"
             f" ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = {NOW},"
             f" seen_at = {NOW}, stopped_at = NULL")
_SEEN = f"UPDATE cluster_instances SET seen_at = {NOW} WHERE id = $1"
_STOPPED = f"UPDATE cluster_instances SET stopped_at = {NOW} WHERE id = $1"
_STILL_HOLDS = f"SELECT 1 FROM cluster_leases WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at >= {NOW}"




def default_instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    instance: str
    lease_seconds: float = 15.0
    sweep_grace: float = 2.0  # seconds a message may wait unclaimed before a sweep takes it
    stop_timeout: float = 5.0  # seconds to wait for the instance running a session to answer a /stop

    @property
    def beat(self) -> float:
        return self.lease_seconds / 3


class _Held:
    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def lost(self) -> None:
        await self.gone.wait()


class Cluster(Asking):
    """``bot.peers.Peers`` on PostgreSQL, and ``Leases`` for the channels."""

    settings: ClusterSettings

    def __init__(self, pool: asyncpg.Pool, url: str, settings: ClusterSettings) -> None:
        self._pool = pool
        self.settings = settings
        self.instance = settings.instance
        self._leases = LeaseRows(self.instance, settings.lease_seconds)
        self._bus = Bus(url, self.instance, self._notified, reconnected=self._resync)
        self._host: Host | None = None
        self._held: dict[str, int] = {}  # session key -> token of its lane's lease
        self._taken: dict[str, set[int]] = {}  # session key -> inbound ids its lane here has taken
        self._locks: dict[str, asyncio.Lock] = {}
        self._named: dict[str, _Held] = {}  # leases channels hold (pollers, shards)
        self._sweeps: list[Callable[[], Awaitable[None]]] = []
        self._keeping: dict[str, int] = {}  # session key -> stops under way here: its lane is not given back
        self._responders: dict[str, Responder] = {}  # a capability's questions (bot.peers.Asks), by kind
        self._seen = 0.0  # when (loop time) the last heartbeat that went through was sent
        self._elsewhere: dict[str, tuple[str, float]] = {}  # session key -> (its holder, until when: loop time)
        self._claimed: set[str] = set()  # answers claimed for delivery here by their turn's commit, not sent yet
        self._idle: dict[str, float] = {}  # session key -> when its lane here went idle (loop time), lease still held
        self._tasks = OwnedTasks()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, host: Host) -> None:
        """Join: the tables, this instance's row, the bus; the heartbeat starts (the first sweep
        is ``recover``'s, once the core is ready)."""
        self._host = host
        self._seen = asyncio.get_running_loop().time()
        async with self._pool.acquire() as conn:
            await schema.apply(conn)
            await conn.execute(_REGISTER, self.instance, socket.gethostname(), os.getpid())
        await self._bus.start()
        self._tasks.spawn(self._beat(), "cluster heartbeat")
        log.info("cluster: instance %s joined (leases of %.0f s)", self.instance, self.settings.lease_seconds)

    async def aclose(self) -> None:
        """Leave: stop the heartbeat, give back every lease and mark the instance stopped, so
        that others take over at once what it leaves unanswered or undelivered. Nothing when it
        never started (the app's start-up failed before)."""
        if self._host is None:
            return
        await self._tasks.stop()
        await self._bus.aclose()
        try:
            async with self._pool.acquire() as conn:
                await self._leases.release_all(conn)
                await conn.execute(_STOPPED, self.instance)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("cluster: could not give back the leases of %s (%s); they expire", self.instance, exc)
        self._held.clear()
        self._idle.clear()
        log.info("cluster: instance %s left", self.instance)

    async def recover(self) -> None:
        await self.sweep()

    def add_sweep(self, sweep: Callable[[], Awaitable[None]]) -> None:
        """Run ``sweep`` after each heartbeat's own: take over what dead instances claimed (see the
        module doc); its failures are logged, and it runs again at the next heartbeat."""
        self._sweeps.append(sweep)

    # -- Peers: session lanes ----------------------------------------------------------

    async def claim(self, record: InboundRecord) -> bool:
        session_key, inbound_id = record.session_key, record.id
        async with self._lock(session_key):
            taken = self._taken.get(session_key)
            if session_key in self._held and taken is not None:
                if inbound_id in taken:
                    return False
                taken.add(inbound_id)
                return True
            now = asyncio.get_running_loop().time()
            holder, until = self._elsewhere.get(session_key, (None, 0.0))
            if until > now:  # held there a moment ago (a conversation's messages come on: no statement)
                token = None
            else:
                token, holder = await self._leases.acquire_or_holder(self._pool, _lane(session_key))
                if holder is not None and holder != self.instance:
                    self._elsewhere[session_key] = (holder, now + self.settings.beat)
            if token is not None:
                self._elsewhere.pop(session_key, None)
                self._held[session_key] = token
                self._taken.setdefault(session_key, set())
                await self._take_waiting(session_key, but=inbound_id)
                self._taken.setdefault(session_key, set()).add(inbound_id)
                return True
        if holder is None or holder == self.instance:  # it went free meanwhile: try once more through the pull path
            self._tasks.spawn(self._pull(session_key), f"pull {session_key}")
        else:
            log.info("cluster: session %s runs on %s; message %s handed over", session_key, holder, inbound_id)
            await self._bus.send(self._pool, holder, {"kind": "pull", "key": session_key, **work.handed(record)})
        return False

    async def own(self, session_key: str) -> None:
        while True:
            async with self._lock(session_key):
                if session_key in self._held or await self._acquire(session_key):
                    return
            holder = await self._leases.holder_of(self._pool, _lane(session_key))
            if holder is not None and holder != self.instance:  # idle there: given back at once (else busy)
                answers = await self._bus.request(self._pool, holder, {"kind": "giveback", "key": session_key},
                                                  timeout=self.settings.stop_timeout)
                if answers and answers[0].get("released"):
                    continue
            await asyncio.sleep(min(1.0, self.settings.beat))

    @contextmanager
    def keeping(self, session_key: str) -> Iterator[None]:
        self._keeping[session_key] = self._keeping.get(session_key, 0) + 1
        try:
            yield
        finally:
            if (left := self._keeping.pop(session_key) - 1) > 0:
                self._keeping[session_key] = left
        self.idle(session_key)

    def idle(self, session_key: str) -> None:
        if session_key in self._held:  # given back by a heartbeat a beat from now (``_give_back``)
            self._idle[session_key] = asyncio.get_running_loop().time()

    async def stop(self, session_key: str) -> Stopped | None:
        if session_key in self._held:
            return None
        holder = await self._leases.holder_of(self._pool, _lane(session_key))
        if holder is None or holder == self.instance:
            return None if holder else (False, 0, ())
        answers = await self._bus.request(self._pool, holder, {"kind": "stop", "key": session_key},
                                          timeout=self.settings.stop_timeout)
        if not answers:
            return False, 0, ()
        a = answers[0]
        return bool(a["stopped"]), int(a["dropped"]), tuple(int(i) for i in a["ids"])

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        others = await self._pool.fetchval(ALIVE_OTHERS, self.instance, self.settings.lease_seconds)
        if not others:
            return 0
        answers = await self._bus.request(self._pool, None, {"kind": "stopall", "platform": platform,
                                                             "chat": chat_id}, answers=others, timeout=2.0)
        return sum(int(a["count"]) for a in answers)

    async def claim_answer(self, answer: Answer) -> bool:
        if answer.id in self._claimed:  # by its turn's commit (``fence``)
            self._claimed.discard(answer.id)
            if asyncio.get_running_loop().time() - self._seen < self.settings.lease_seconds / 2:
                return True  # no statement: nobody can have taken it over, this instance was seen since
        return await work.claim_answer(self._pool, answer.id, self.instance, self.settings.lease_seconds)

    # -- fencing ---------------------------------------------------------------------------

    def fence(self, session_key: str) -> Fence:
        """What a turn of the session commits under (``PostgresStore.fence_with``): its lane's
        lease, this instance, and the token this instance took it with (None when it does not hold
        it). A sub-agent's session is its parent's lane."""
        lane = _lane_of(session_key)
        return Fence(_lane(lane), self.instance, self._held.get(lane), int(self.settings.lease_seconds * 1000),
                     self.settings.lease_seconds, self._claimed.add)

    async def still_holds(self, session_key: str) -> bool:
        """The session's lane is still this instance's, now: the lease it took, unchanged and not
        run out. For the tool gate, before a tool with side effects; False at once (no query)
        when this instance does not hold the lane, and when the database cannot say."""
        fence = self.fence(session_key)
        if fence.token is None:
            return False
        try:
            return await self._pool.fetchval(_STILL_HOLDS, fence.lease, fence.holder, fence.token) is not None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            log.warning("cluster: cannot tell whether %s still holds session %s (%s)", self.instance, session_key, exc)
            return False

    # -- approvals whose run waits elsewhere (bot.approvals.Elsewhere) -------------------

    async def decide_elsewhere(self, record: Waiting, decision: str, msg: InboundMessage) -> str | None:
        holder = await self._leases.holder_of(self._pool, _lane(record.session_key))
        if holder is None or holder == self.instance:
            raise LookupError(record.session_key)
        who = replace(msg, text="", attachments=())  # who decides and where, never what they wrote: it fits a NOTIFY
        answers = await self._bus.request(self._pool, holder, {
            "kind": "decide", "approval": record.id, "decision": decision, "msg": inbound_to_json(who)},
            timeout=self.settings.stop_timeout)
        if not answers:
            raise LookupError(record.session_key)
        reply = answers[0]["reply"]
        return str(reply) if reply is not None else None

    async def running_elsewhere(self, session_key: str) -> bool:
        holder = await self._leases.holder_of(self._pool, _lane(session_key))
        return holder is not None and holder != self.instance

    async def take_rate(self, person: str, capacity: float, per_second: float) -> float:
        """``bot.limits.SharedRates``: one message of ``person``'s rate, counted across instances."""
        return await rates.take(self._pool, person, capacity, per_second)

    # -- Leases for channels -----------------------------------------------------------

    def hold(self, name: str) -> AbstractAsyncContextManager[Held]:
        return self._hold(name)

    @asynccontextmanager
    async def _hold(self, name: str) -> AsyncIterator[Held]:
        held = _Held()
        while await self._leases.acquire(self._pool, name) is None:
            await asyncio.sleep(self.settings.beat)
        self._named[name] = held
        log.info("cluster: %s holds %s", self.instance, name)
        try:
            yield held
        finally:
            self._named.pop(name, None)
            if not held.gone.is_set():
                await self._leases.release(self._pool, name)

    # -- the work --------------------------------------------------------------------

    async def sweep(self) -> None:
        """Take over what nobody holds: sessions with waiting messages, answers nobody sends."""
        assert self._host is not None
        for key in await work.orphan_sessions(self._pool, self.settings.sweep_grace):
            if key not in self._held:
                log.info("cluster: taking over session %s (its messages wait with no live instance)", key)
                await self._pull(key)
        for answer in await work.orphan_answers(self._pool, self.settings.lease_seconds):
            log.info("cluster: taking over the delivery of %s", answer.id)
            self._host.deliver(answer)
        for other in self._sweeps:
            try:
                await other()
            except Exception:
                log.exception("cluster: a sweep failed; it runs again at the next heartbeat")

    async def _resync(self) -> None:
        """After the LISTEN connection came back: hand-overs told meanwhile were missed, so look at
        every session held here, then at what nobody holds."""
        for key in list(self._held):
            await self._pull(key)
        await self.sweep()

    async def _pull(self, session_key: str, handed: InboundRecord | None = None) -> None:
        """Another instance stored a message of a session this one holds (or may now take): one
        ``handed`` in the notification is taken as it came, unless the lane is taken only now
        (then every message of the session still waiting is read)."""
        async with self._lock(session_key):
            newly = session_key not in self._held
            if newly and not await self._acquire(session_key):
                return
            took = await self._take_waiting(session_key, [handed] if handed is not None and not newly else None)
            assert self._host is not None
            if newly and not took and not self._host.busy(session_key):
                await self._let_go(session_key)

    async def _take_waiting(self, session_key: str, records: list[InboundRecord] | None = None, *,
                            but: int | None = None) -> int:
        """Hand the session's waiting messages (``records``, else read from the store) not taken
        yet to the core, oldest first."""
        assert self._host is not None
        taken = self._taken.setdefault(session_key, set())
        count = 0
        for record in records if records is not None else await work.waiting(self._pool, session_key):
            if record.id in taken or record.id == but:
                continue
            taken.add(record.id)
            count += 1
            await self._host.take(record)
        return count

    async def _acquire(self, session_key: str) -> bool:
        token = await self._leases.acquire(self._pool, _lane(session_key))
        if token is None:
            return False
        self._elsewhere.pop(session_key, None)
        self._held[session_key] = token
        self._taken.setdefault(session_key, set())
        return True

    async def _release(self, session_key: str) -> None:
        async with self._lock(session_key):
            assert self._host is not None
            if session_key not in self._held or self._host.busy(session_key) or session_key in self._keeping:
                return
            taken = self._taken.get(session_key, set())
            await self._let_go(session_key)
        # a message handed over while the lease was being given back: take it (or its new holder does)
        if any(r.id not in taken for r in await work.waiting(self._pool, session_key)):
            await self._pull(session_key)

    async def _let_go(self, session_key: str) -> None:
        await self._leases.release(self._pool, _lane(session_key))
        self._held.pop(session_key, None)
        self._idle.pop(session_key, None)
        self._taken.pop(session_key, None)
        self._locks.pop(session_key, None)

    def _lock(self, session_key: str) -> asyncio.Lock:
        return self._locks.setdefault(session_key, asyncio.Lock())

    async def _beat(self) -> None:
        """Heartbeat and renewal, then a sweep, every third of a lease; what could not be renewed
        within a lease's time is given up here."""
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            await asyncio.sleep(self.settings.beat)
            held, named = dict(self._held), set(self._named)  # what renewing judges (not what comes meanwhile)
            try:
                sent = loop.time()
                async with self._pool.acquire() as conn:
                    await conn.execute(_SEEN, self.instance)
                    still = await self._leases.renew(conn)
                renewed = self._seen = sent
                observe.signal(Signal.HEARTBEAT, value=1)
                self._lost({key for key, token in held.items()
                            if self._held.get(key) == token and still.get(_lane(key)) != token},
                           {name for name in named if name in self._named and name not in still})
                observe.signal(Signal.LEASES, name="sessions", value=len(self._held))
                observe.signal(Signal.LEASES, name="channels", value=len(self._named))
                await self._give_back(loop.time() - self.settings.beat)
                self._elsewhere = {key: seen for key, seen in self._elsewhere.items() if seen[1] > loop.time()}
                await self.sweep()
                await work.prune_claims(self._pool)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.error("cluster: heartbeat failed (%s)", exc)
                observe.signal(Signal.HEARTBEAT, value=0)
                if loop.time() - renewed > self.settings.lease_seconds:
                    log.error("cluster: no heartbeat for a lease's time: giving up everything %s held",
                              self.instance)
                    self._lost(set(self._held), set(self._named))

    async def _give_back(self, before: float) -> None:
        """Give back the leases of the lanes idle here since ``before`` (still idle: ``_release``)."""
        for key in [key for key, since in self._idle.items() if since <= before]:
            self._idle.pop(key, None)
            await self._release(key)

    def _lost(self, sessions: set[str], named: set[str]) -> None:
        assert self._host is not None
        for key in sessions:
            log.warning("cluster: lost session %s to another instance; its lane here ends", key)
            self._held.pop(key, None)
            self._idle.pop(key, None)
            self._taken.pop(key, None)
            self._host.abandon(key)
        for name in named:
            log.warning("cluster: lost %s to another instance", name)
            self._named[name].gone.set()

    def _notified(self, message: Message) -> None:
        kind = message.get("kind")
        if kind == "pull":
            self._tasks.spawn(self._pull(str(message["key"]), work.handed_in(message)), "pull")
        elif kind == "stop":
            self._tasks.spawn(self._stop_here(message), "remote stop")
        elif kind == "stopall" and message.get("from") != self.instance:
            self._tasks.spawn(self._stop_chat_here(message), "remote stopall")
        elif kind == "decide":
            self._tasks.spawn(self._decide_here(message), "remote decision")
        elif kind == "giveback":
            self._tasks.spawn(self._giveback_here(message), "give back")
        elif (answer := self._responders.get(str(kind))) is not None and message.get("from") != self.instance:
            self._tasks.spawn(self._respond(answer, message), f"answer {kind}")

    async def _giveback_here(self, message: Message) -> None:
        """Another instance wants a session's lane for a turn of its own: given back if idle here."""
        key = str(message["key"])
        if self._idle.pop(key, None) is not None:
            await self._release(key)
        await self._bus.answer(self._pool, message, {"released": key not in self._held})

    async def _stop_here(self, message: Message) -> None:
        assert self._host is not None
        stopped, dropped, ids = await self._host.stop_here(str(message["key"]))
        await self._bus.answer(self._pool, message, {"stopped": stopped, "dropped": dropped, "ids": list(ids)})

    async def _decide_here(self, message: Message) -> None:
        assert self._host is not None
        reply = await self._host.decide_here(str(message["approval"]), str(message["decision"]),
                                             inbound_from_json(str(message["msg"])))
        await self._bus.answer(self._pool, message, {"reply": reply})

    async def _stop_chat_here(self, message: Message) -> None:
        assert self._host is not None
        count = await self._host.stop_chat_here(str(message["platform"]), str(message["chat"]))
        await self._bus.answer(self._pool, message, {"count": count})


def _lane(session_key: str) -> str:
    return f"session:{session_key}"


def _lane_of(session_key: str) -> str:
    """The session key whose lane runs ``session_key``: a sub-agent's runs in its parent's."""
    try:
        key = parse_key(session_key)
    except ValueError:
        return session_key
    return str(replace(key, subs=())) if key.subs else session_key
