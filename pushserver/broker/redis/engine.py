"""The Redis engines' facade: publish, follow channels for subscribers, channel info.

Each node SUBSCRIBEs only to the channels it holds subscribers for (`Listen`), and applies what
it learns through a `Sequencer` per channel, strictly in id order: a notification that skips ids
(lost while reconnecting, or overtaken by another node's read) is queued and the missing ids are
read from the stream; when they are gone, or Redis lost the channel (a new epoch), the sink is
told of the jump and its subscribers get a gap instead of silence.

`Engine` does this over shards (`shard.Shard`: one per Redis primary); the engines differ only in
where a channel's shard is: one Redis (`RedisBroker`), a master found through Sentinel
(`sentinel.SentinelBroker`), or the primary holding the channel's slot (`cluster.ClusterBroker`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...config import Settings
from ...core.broker import ChannelInfo, Item
from ...core.errors import Unavailable, broker_down, outcome_unknown
from ...core.history import Histories
from ...core.messages import Message
from ...core.positions import Position, unstarted
from ..ordering import Sequencer
from ..sinks import Reporting
from .link import BATCH, DOWN_ERRORS, Link
from .pipe import Script
from .scripts import GENERATION_KEY, Keys, notification, publish_lua, stream_messages, sync_lua
from .shard import NotDurable, Plan, Shard, Writer, closed, fail

log = logging.getLogger("pushserver.redis")

GRACE = 3.0
"""Seconds a channel stays subscribed after its last local subscriber, so re-polls do not churn."""
CONFIRM_TIMEOUT = 5.0
META_TTL_MIN = 86400.0
"""A channel's epoch and id counter outlive its history, so an old cursor gets an exact gap."""
NAMES_KEPT = 1 << 16
"""Channels whose epochs Redis counts by name (`scripts.STARTS_KEY`): about 100 bytes and the
name each."""
RETRY_AFTER = 2


class Listen:
    """This node's subscription to one channel's notifications, and its order."""

    __slots__ = ("confirmed", "name", "order", "shard", "timer", "topic", "touched")

    def __init__(self, order: Sequencer, topic: bytes, shard: Shard | None) -> None:
        self.name = order.name
        self.order = order
        self.topic = topic
        self.shard = shard
        """Where the channel is subscribed; None while no reachable primary holds it."""
        self.confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None
        self.touched = 0.0


def _failed(future: asyncio.Future[None]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def _down() -> Unavailable:
    return broker_down("redis", RETRY_AFTER)


def _behind(rec: Listen, positions: Mapping[str, Position]) -> bool:
    """Whether the subscriber's position in `rec`'s channel is ahead of this node."""
    position = positions.get(rec.name)
    return position is not None and rec.order.behind(*position)


class Engine(Reporting):
    """What every Redis engine does; a subclass says where a channel's shard is."""

    name = "redis"
    keys = Keys()
    notify = "PUBLISH"
    sharded = False
    """A cluster's shards: SSUBSCRIBE, and a `sunsubscribe` pushed means the slot moved."""

    def __init__(self, settings: Settings) -> None:
        assert settings.redis
        self.history_size = settings.history_size
        self.history_ttl = settings.history_ttl
        self.replicas = settings.wait_replicas
        self.plan = Plan(
            self.keys,
            Script(publish_lua(self.keys, "" if self.replicas else self.notify)),
            Script(sync_lua(self.keys)),
            self.notify,
            self.replicas,
            settings.history_size,
            max(1, int(settings.history_ttl * 1000)),
            int(max(2 * settings.history_ttl, META_TTL_MIN) * 1000),
            NAMES_KEPT,
            self.trusted,
        )
        self.records: dict[str, Listen] = {}
        self.by_topic: dict[bytes, Listen] = {}
        self._loop = asyncio.get_running_loop()
        self._background: set[asyncio.Task[None]] = set()
        self.history = Histories(settings.history_size, settings.history_ttl, unstarted(""))
        """The histories of the channels followed here; `history.unstarted` is the unstarted
        epoch of the Redis database's generation, read at every connect."""

    def trusted(self) -> str:
        """Lineages the scripts trust besides their own: with `WAIT`, a promoted replica's
        predecessor (`*`, see LINEAGE_LUA)."""
        return "*" if self.replicas else ""

    def shard_of(self, name: str) -> Shard | None:
        raise NotImplementedError

    @property
    def shards(self) -> list[Shard]:
        raise NotImplementedError

    @property
    def healthy(self) -> bool:
        return bool(self.shards) and all(shard.link.up for shard in self.shards)

    def make_shard(self, name: str, client: Redis, writer: Writer, url: str) -> Shard:
        """A shard whose link reports here; started by the caller (`shard.link.start()`)."""
        holder: list[Shard] = []
        moved = self._moved if self.sharded else None
        link = Link(
            client,
            url,
            self._notified,
            self._subscribed,
            lambda: self._resync(holder[0]),
            lambda: self._lost(holder[0]),
            moved,
        )
        holder.append(Shard(name, self.plan, client, writer, link))
        return holder[0]

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        for shard in self.shards:
            await shard.close(closed)

    # -- connection ---------------------------------------------------------------------------

    async def generation(self, shard: Shard) -> str:
        """The database's generation (see GENERATION_KEY), set if missing."""
        await shard.client.set(GENERATION_KEY, secrets.token_hex(5), nx=True)
        generation = await shard.client.get(GENERATION_KEY)
        if not isinstance(generation, bytes):
            raise RedisConnectionError("Redis lost the generation key as it was set")
        return generation.decode()

    async def _resync(self, shard: Shard) -> int:
        """After a (re)connect: subscribe to every channel followed here on this shard, then
        read what was missed, in batches."""
        self.history.unstarted = unstarted(await self.generation(shard))
        records = [rec for rec in self.records.values() if rec.shard is shard]
        for rec in records:
            rec.confirmed = self._loop.create_future()
            shard.link.send("SUBSCRIBE", rec.topic)
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            await self._confirmed(chunk)
            await self._refresh(chunk)
        return len(records)

    def _lost(self, shard: Shard) -> None:
        for rec in self.records.values():
            if rec.shard is shard:
                fail(rec.confirmed)

    def _moved(self, topic: bytes) -> None:
        """A cluster primary unsubscribed a topic itself: its slot moved (`cluster`)."""

    # -- publishing ---------------------------------------------------------------------------

    def publish(self, items: Sequence[Item]) -> Coroutine[Any, Any, list[Message]]:
        return self._published(items)  # ids come from Redis: always a wait

    async def _published(self, items: Sequence[Item]) -> list[Message]:
        groups: dict[Shard, list[int]] = {}
        for n, item in enumerate(items):
            shard = self.shard_of(item[0])
            if shard is None or not shard.link.up:
                raise _down()
            groups.setdefault(shard, []).append(n)
        if len(groups) == 1:  # one Redis, or one shard: no task per publish
            [shard] = groups
            try:
                assigned = await shard.publishing.submit(items)
            except Exception as exc:
                raise self._unpublished([(shard, exc)]) from None
        else:
            assigned = await self._spread(items, groups)
        out = []
        for (name, data, _), (epoch, id_, ts, repeat) in zip(items, assigned, strict=True):
            message = Message(name, epoch.decode(), int(id_), float(ts), data)
            rec = self.records.get(name)
            if not repeat and rec is not None and rec.order.loaded:
                rec.order.offer(message, fetch=False)
            out.append(message)
        return out

    async def _spread(self, items: Sequence[Item], groups: dict[Shard, list[int]]) -> list[Any]:
        """A publish whose channels live on several shards: a script call on each."""
        calls = [shard.publishing.submit([items[n] for n in at]) for shard, at in groups.items()]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assigned: list[Any] = [None] * len(items)
        failed = []
        for (shard, at), result in zip(groups.items(), results, strict=True):
            if isinstance(result, BaseException):
                failed.append((shard, result))
                continue
            for n, reply in zip(at, result, strict=True):
                assigned[n] = reply
        if failed:
            raise self._unpublished(failed)
        return assigned

    def _unpublished(self, failed: list[tuple[Shard, BaseException]]) -> Unavailable:
        """The error for a publish whose script calls failed: `outcome_unknown` when one may
        have run (its reply lost, or its replicas not confirmed): only a retry with the same
        key can tell, so it is never answered as "not published"."""
        unknown = False
        for shard, exc in failed:
            if isinstance(exc, DOWN_ERRORS):
                shard.link.lose(exc)
            elif isinstance(exc, NotDurable):
                log.warning("publish not acknowledged: %s", exc)
            elif isinstance(exc, RedisError):
                self.unrouted(exc)
                continue
            else:
                raise exc  # a bug, or a cancellation: not Redis's answer
            unknown = True
        return outcome_unknown("redis", RETRY_AFTER) if unknown else _down()

    def unrouted(self, exc: BaseException) -> None:
        """A command failed without losing its connection (a cluster redirects it here)."""
        log.warning("Redis refused a command: %s", exc)

    # -- following channels ---------------------------------------------------------------------

    def subscribe(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> Coroutine[Any, Any, None] | None:
        records = [self._listen(name) for name in names]
        if all(r.order.loaded and not _behind(r, positions) for r in records):
            return None
        return self._follow(records, positions)

    async def _follow(self, records: list[Listen], positions: Mapping[str, Position]) -> None:
        """Subscribe (confirmed) before reading the stream, so nothing falls between the two;
        read again when the subscriber's cursor is ahead of what this node has seen."""
        stale = [r for r in records if not r.order.loaded or _behind(r, positions)]
        if stale:
            if not all(r.shard is not None and r.shard.link.connected for r in stale):
                raise _down()
            try:
                await self._confirmed(stale)
                await self._refresh(stale)
            except DOWN_ERRORS:
                raise _down() from None  # the shard's link is lost already (`_read`)
            except RedisError as exc:
                self.unrouted(exc)
                raise _down() from None
        for rec in records:
            if not rec.order.loaded:
                raise _down()

    def unsubscribe(self, names: Sequence[str]) -> None:
        for name in names:
            rec = self.records.get(name)
            if rec is not None:
                self._touch(rec)

    async def info(self, name: str) -> ChannelInfo | None:
        rec = self.records.get(name)
        shard = self.shard_of(name)
        if shard is None:
            raise _down()
        try:
            if rec is not None and rec.order.loaded:
                if shard.link.up:
                    await self._refresh([rec])
                return self.history.info(name)
            pipe = shard.client.pipeline(transaction=False)
            meta, hist = self.keys.channel(name)
            pipe.hmget(meta, "e", "i")
            pipe.xrevrange(hist, count=self.history_size)
            (epoch, last), entries = await pipe.execute()
        except DOWN_ERRORS as exc:
            shard.link.lose(exc)
            raise _down() from None
        except RedisError as exc:
            self.unrouted(exc)
            raise _down() from None
        if epoch is None:
            return None
        cutoff = time.time() - self.history_ttl
        kept = [m for m in stream_messages(name, epoch, entries) if m.ts >= cutoff]
        return ChannelInfo(epoch.decode(), int(last or 0), len(kept))

    def _listen(self, name: str) -> Listen:
        rec = self.records.get(name)
        if rec is None:
            shard = self.shard_of(name)
            rec = Listen(Sequencer(name, self.history, self.sink), self.keys.topic(name), shard)
            if shard is None:
                fail(rec.confirmed)
            else:
                rec.confirmed = shard.subscribe(rec.topic)
            self.records[name] = self.by_topic[rec.topic] = rec
        elif _failed(rec.confirmed) and rec.shard is not None and rec.shard.link.connected:
            rec.confirmed = rec.shard.subscribe(rec.topic)  # a failed SUBSCRIBE is tried again
        self._touch(rec)
        return rec

    async def _confirmed(self, records: Sequence[Listen]) -> None:
        """Wait for the SUBSCRIBE confirmations. They are shared by every subscriber of a
        channel, so a waiter that is cancelled (its client left) must leave them untouched:
        `asyncio.wait` never cancels what it waits for."""
        waiting = {r.confirmed for r in records if not r.confirmed.done()}
        if waiting:
            _, pending = await asyncio.wait(waiting, timeout=CONFIRM_TIMEOUT)
            if pending:
                exc = RedisTimeoutError("Redis did not confirm SUBSCRIBE")
                for shard in {r.shard for r in records if r.confirmed in pending}:
                    if shard is not None:
                        shard.link.lose(exc)
                raise exc
        for r in records:
            r.confirmed.result()

    def _subscribed(self, topic: bytes) -> None:
        rec = self.by_topic.get(topic)
        if rec is not None and not rec.confirmed.done():
            rec.confirmed.set_result(None)

    def _touch(self, rec: Listen) -> None:
        rec.touched = self._loop.time()
        if rec.timer is None:
            rec.timer = self._loop.call_later(GRACE, self._check, rec)

    def _check(self, rec: Listen) -> None:
        """Stop listening once the channel has had no local subscriber for the grace time."""
        rec.timer = None
        if self.records.get(rec.name) is not rec:
            return
        if self.sink.audience(rec.name):
            return  # the last one to leave calls release(), which re-arms the timer
        remaining = rec.touched + GRACE - self._loop.time()
        if rec.order.reading or (not rec.order.loaded and not rec.confirmed.done()):
            remaining = GRACE
        if remaining > 0:
            rec.timer = self._loop.call_later(remaining, self._check, rec)
            return
        del self.records[rec.name]
        del self.by_topic[rec.topic]
        self.history.pop(rec.name, None)
        if rec.shard is not None:
            rec.shard.link.send("UNSUBSCRIBE", rec.topic)

    # -- applying messages in id order -----------------------------------------------------------

    def _notified(self, topic: bytes, payload: bytes) -> None:
        rec = self.by_topic.get(topic)
        if rec is None:
            return
        need = False
        for message in notification(rec.name, payload):
            need = rec.order.offer(message) or need
        if need:
            self.spawn(self._refresh([rec]))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not isinstance(exc, DOWN_ERRORS):  # those lost their link
            self.unrouted(exc)  # the queued messages are read again at the next notification

    async def _refresh(self, records: Sequence[Listen]) -> None:
        """Read each channel's epoch and the messages this node has not seen, and apply them."""
        groups: dict[Shard | None, list[Listen]] = {}
        for rec in records:
            groups.setdefault(rec.shard, []).append(rec)
        for shard, group in groups.items():
            if shard is None:
                raise RedisConnectionError("no reachable primary holds the channel")
            await self._read(shard, group)

    async def _read(self, shard: Shard, records: list[Listen]) -> None:
        froms = [rec.order.read_from() for rec in records]
        try:
            results = await shard.read([rec.name for rec in records], froms)
        except DOWN_ERRORS as exc:
            shard.link.lose(exc)
            raise
        finally:
            for rec in records:
                rec.order.done_reading()
        again = []
        for rec, asked, (found, last, entries, tag) in zip(records, froms, results, strict=True):
            current: bytes = found or self.history.unstarted.encode() + tag  # no keys: unstarted
            ordered = reversed(entries) if asked[1] < 0 else entries
            messages = stream_messages(rec.name, current, ordered)
            if rec.order.apply(asked, current.decode(), int(last), messages):
                again.append(rec)
        if again:
            self.spawn(self._refresh(again))
