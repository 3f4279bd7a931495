"""The Redis engines' facade: publish, subscribe, channel info, over shards.

`Engine` publishes through the shard holding each channel (`shard.Shard`: one per Redis primary)
and follows channels through `following.Following`; the engines differ only in where a channel's
shard is: one Redis (`single.RedisBroker`), the master the sentinels name
(`sentinel.SentinelBroker`), or the primary holding the channel's slot (`cluster.ClusterBroker`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from ...config import Settings
from ...core.broker import ChannelInfo, Item
from ...core.errors import Unavailable, broker_down, outcome_unknown
from ...core.messages import Message
from ...core.positions import Position
from .coalesce import Coalescer
from .following import Following, Listen, behind
from .link import DOWN_ERRORS, Link
from .pipe import Script
from .scripts import Keys, end_lua, publish_lua, stream_messages, sync_lua
from .shard import (
    NotDurable,
    OneConnection,
    Plan,
    Shard,
    Unnotified,
    Writer,
    closed,
    read_pool,
)

log = logging.getLogger("pushserver.redis")

META_TTL_MIN = 86400.0
"""A channel's epoch and id counter outlive its history, so an old cursor gets an exact gap."""
NAMES_KEPT = 1 << 16
"""Channels whose epochs Redis counts by name (`scripts.STARTS_KEY`): about 100 bytes and the
name each."""
RETRY_AFTER = 2


def covers_every_replica(wait: int, replicas: int) -> bool:
    """Whether publishes that wait for `wait` replicas (`WAIT`) are held by every one of a
    primary's `replicas`, so a promoted replica lacks nothing anyone was told of."""
    return wait > 0 and wait >= replicas


def _down() -> Unavailable:
    return broker_down("redis", RETRY_AFTER)


class Engine(Following):
    """What every Redis engine does; a subclass says where a channel's shard is."""

    name = "redis"
    keys = Keys()
    notify = "PUBLISH"
    sharded = False
    """A cluster's shards: SSUBSCRIBE, and a `sunsubscribe` pushed means the slot moved."""

    def __init__(self, settings: Settings) -> None:
        assert settings.redis
        super().__init__(settings)
        self.history_size = settings.history_size
        self.history_ttl = settings.history_ttl
        self.replicas = settings.wait_replicas
        self.most_replicas = 0
        """The most replicas any primary has reported to this node (`observe`)."""
        self._trust = self._trusting()
        self.lineages: dict[str, str] = {}
        """Each primary's `master_replid` (8 hex digits), by shard name (`observe`)."""
        self.warnings: list[str] = []
        """What an operator should change, for the log and /stats."""
        self.plan = Plan(
            self.keys,
            Script(publish_lua(self.keys, "" if self.replicas else self.notify)),
            Script(sync_lua(self.keys)),
            Script(end_lua(self.keys)),
            self.notify,
            self.replicas,
            settings.history_size,
            max(1, int(settings.history_ttl * 1000)),
            int(max(2 * settings.history_ttl, META_TTL_MIN) * 1000),
            NAMES_KEPT,
            self.trusted,
            self.node,
            settings.redis_migration_wait,
        )

    def node(self, name: str) -> Shard | None:
        """The shard on the primary `name` (host:port) that a cluster redirects to (`cluster`)."""
        return None

    def trusted(self) -> str:
        """Lineages the scripts trust besides their own: a promoted replica's predecessor (`*`,
        see LINEAGE_LUA) when every publish waited for every replica (`WAIT`), so whichever
        replica is promoted holds all that anyone saw. With fewer (two replicas, `WAIT 1`), the
        one that answered may not be the one promoted, or may follow a demoted master that goes
        on taking writes: a failover then ends the epoch of each channel it touches.

        Asked on every publish, so worked out only when the replica count moves (`observe`)."""
        return self._trust

    def _trusting(self) -> str:
        return "*" if covers_every_replica(self.replicas, self.most_replicas) else ""

    async def observe(self, shard: Shard) -> None:
        """Read a primary's lineage and replica count; warn once per count `WAIT` falls short of."""
        self.lineages[shard.name], replicas = await shard.replication()
        if replicas <= self.most_replicas:
            return
        self.most_replicas = replicas
        self._trust = self._trusting()
        if self.replicas < replicas:
            text = (
                f"--redis-replicas {self.replicas} is below the {replicas} replicas a Redis "
                "primary reports: the replica promoted at a failover may lack acknowledged "
                "messages, so each failover ends the epoch of every channel it touches "
                f"(subscribers get a gap); --redis-replicas {replicas} fails over without one"
            )
            log.warning("%s", text)
            self.warnings = [text]

    async def _resync(self, shard: Shard) -> int:
        await self.observe(shard)
        return await super()._resync(shard)

    @property
    def shards(self) -> list[Shard]:
        raise NotImplementedError

    @property
    def healthy(self) -> bool:
        return bool(self.shards) and all(shard.link.up for shard in self.shards)

    def make_shard(self, name: str, client: Redis, writer: Writer, url: str) -> Shard:
        """A shard whose link reports here; started by the caller (`shard.link.start()`)."""
        holder: list[Shard] = []
        moved = (lambda slot, topic: self._moved(holder[0], slot, topic)) if self.sharded else None
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

    def open_node(self, url: str, name: str, **credentials: Any) -> Shard:
        """A shard on one node, all through redis-py: a read pool and one publishing
        connection (cluster and Sentinel; one Redis keeps its pipe, `single`)."""
        client = Redis(connection_pool=read_pool(url, **credentials))
        writer = OneConnection(read_pool(url, size=1, **credentials))
        return self.make_shard(name, client, writer, url)

    async def stop(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
        for task in list(self._background):
            task.cancel()
        for shard in self.shards:
            await shard.close(closed)

    def _moved(self, shard: Shard, slot: int, topic: bytes | None) -> None:
        """A cluster primary dropped a topic itself, or refused one in `slot` (`cluster`)."""

    # -- publishing ---------------------------------------------------------------------------

    def slot_of(self, name: str) -> int:
        """One script call reaches the keys of one slot only (a cluster's; one Redis has one)."""
        return 0

    def publish(self, items: Sequence[Item]) -> Coroutine[Any, Any, list[Message]]:
        return self._published(items)  # ids come from Redis: always a wait

    async def _published(self, items: Sequence[Item]) -> list[Message]:
        groups: dict[tuple[Shard, int], list[int]] = {}
        if len(items) == 1:  # one message per request, the usual publish: nothing to group
            target: tuple[Shard, int] | None = self._target(items[0][0])
        else:
            for n, item in enumerate(items):
                groups.setdefault(self._target(item[0]), []).append(n)
            target = next(iter(groups)) if len(groups) == 1 else None
        if target is not None:  # one slot: no task per publish
            shard, slot = target
            return await self._submitted(shard, shard.publishing(slot), items)
        return self._kept(items, await self._spread(items, groups))

    async def _submitted(
        self, shard: Shard, publishing: Coalescer[Item, Any], items: Sequence[Item]
    ) -> list[Message]:
        """`items`, all to one slot of `shard`, published through its `publishing`."""
        if not shard.link.up:
            raise _down()
        try:
            assigned = await publishing.submit(items)
        except Exception as exc:
            raise self._unpublished([(shard, exc)]) from None
        return self._kept(items, assigned)

    def _kept(self, items: Sequence[Item], assigned: Sequence[Any]) -> list[Message]:
        """The messages Redis assigned ids to, each offered to its channel's history here."""
        out = []
        for (name, data, _), (epoch, id_, ts, repeat) in zip(items, assigned, strict=True):
            message = Message(name, epoch.decode(), int(id_), float(ts), data)
            rec = self.records.get(name)
            if not repeat and rec is not None and rec.order.loaded:
                rec.order.offer(message, fetch=False)
            out.append(message)
        return out

    def _target(self, name: str) -> tuple[Shard, int]:
        """The shard and slot a publish to `name` goes to; `503 broker_down` when it is down."""
        shard = self.shard_of(name)
        if shard is None or not shard.link.up:
            raise _down()
        return shard, self.slot_of(name)

    async def _spread(
        self, items: Sequence[Item], groups: dict[tuple[Shard, int], list[int]]
    ) -> list[Any]:
        """A publish whose channels live in several slots: a script call for each."""
        calls = [
            shard.publishing(slot).submit([items[n] for n in at])
            for (shard, slot), at in groups.items()
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assigned: list[Any] = [None] * len(items)
        failed = []
        for ((shard, _), at), result in zip(groups.items(), results, strict=True):
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
        have run (its reply lost, its replicas not confirmed, or its notification refused after
        it was stored): only a retry with the same key can tell, so it is never answered as
        "not published"."""
        unknown = False
        for shard, exc in failed:
            if isinstance(exc, DOWN_ERRORS):
                shard.link.lose(exc)
            elif isinstance(exc, NotDurable):
                log.warning("publish not acknowledged: %s", exc)
            elif isinstance(exc, Unnotified):
                log.warning("publish not notified: %s", exc)
                self.unrouted(exc)  # a redirect to a primary the slot map lacks: read it again
            elif isinstance(exc, RedisError):
                self.unrouted(exc)
                continue
            else:
                raise exc  # a bug, or a cancellation: not Redis's answer
            unknown = True
        return outcome_unknown("redis", RETRY_AFTER) if unknown else _down()

    # -- following channels ---------------------------------------------------------------------

    def subscribe(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> Coroutine[Any, Any, None] | None:
        records = [self._listen(name) for name in names]
        if all(r.order.loaded and not behind(r, positions) for r in records):
            return None
        return self._follow(records, positions)

    async def _follow(self, records: list[Listen], positions: Mapping[str, Position]) -> None:
        """Subscribe (confirmed) before reading the stream, so nothing falls between the two;
        read again when the subscriber's cursor is ahead of what this node has seen."""
        stale = [r for r in records if not r.order.loaded or behind(r, positions)]
        if stale:
            if not all(r.shard is not None and r.shard.link.connected for r in stale):
                raise _down()
            try:
                with self.waited(records):
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
            # the sync script's read (`Shard.read`, redirects followed), nothing subscribed
            ((epoch, last, entries, _),) = await shard.read([name], [("", -1)])
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
