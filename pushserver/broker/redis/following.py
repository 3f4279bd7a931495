"""How a Redis engine follows channels for this node's subscribers, over its shards.

Each node SUBSCRIBEs only to the channels it holds subscribers for (`Listen`), and applies what
it learns through a `Sequencer` per channel, strictly in id order: a notification that skips ids
(lost while reconnecting, or overtaken by another node's read) is queued and the missing ids are
read from the stream; when they are gone, or Redis lost the channel (a new epoch), the sink is
told of the jump and its subscribers get a gap instead of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any

from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...config import Settings
from ...core.history import Histories
from ...core.positions import Position, unstarted
from ...core.refit import refit
from ..ordering import Sequencer
from ..sinks import Reporting
from .link import BATCH, DOWN_ERRORS
from .scripts import GENERATION_KEY, Keys, notification, rolled_back, stream_messages
from .shard import Shard, fail

log = logging.getLogger("pushserver.redis")

GRACE = 3.0
"""Seconds a channel stays subscribed after its last local subscriber, so re-polls do not churn."""
PERIOD = 1.0
"""Seconds between looks at the channels past their grace: each is let go within GRACE +
PERIOD of its last subscriber, by one timer for them all (a timer per channel left uvloop's
timer set at 1 MB, and its pools in use, after a 192,000-channel flood)."""
SWEEP = 4096
"""Channels let go in one look at most; the next look follows at once while more are due."""
CONFIRM_TIMEOUT = 5.0


class Listen:
    """This node's subscription to one channel's notifications, and its order."""

    __slots__ = ("confirmed", "name", "order", "shard", "topic", "touched", "waiting")

    def __init__(
        self, order: Sequencer, topic: bytes, shard: Shard | None, confirmed: asyncio.Future[None]
    ) -> None:
        self.name = order.name
        self.order = order
        self.topic = topic
        self.shard = shard
        """Where the channel is subscribed; None while no reachable primary holds it."""
        self.confirmed = confirmed
        """Its SUBSCRIBE's confirmation; once confirmed, the engine's one done future
        (`Following.confirmed`), so a followed channel keeps no future of its own."""
        self.touched = 0.0
        """When its last subscriber left or it was last asked for (`Following.idle`)."""
        self.waiting = 0
        """Subscribers waiting for the channel to be followed (`Following.waited`): the hub
        counts them only once they hold it, so until then they keep it here."""


def _failed(future: asyncio.Future[None]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


async def read_generation(client: Any) -> str:
    """The generation key (see GENERATION_KEY) through `client`, set first if missing; a key
    gone between the two calls is a Redis that is down for this node (`DOWN_ERRORS`)."""
    await client.set(GENERATION_KEY, secrets.token_hex(5), nx=True)
    generation = await client.get(GENERATION_KEY)
    if not isinstance(generation, bytes):
        raise RedisConnectionError("Redis lost the generation key as it was set")
    return generation.decode()


def behind(rec: Listen, positions: Mapping[str, Position]) -> bool:
    """Whether the subscriber's position in `rec`'s channel is ahead of this node."""
    position = positions.get(rec.name)
    return position is not None and rec.order.behind(*position)


class Following(Reporting):
    """The channels followed here, each on the shard that holds it (`shard_of`)."""

    keys = Keys()

    def __init__(self, settings: Settings) -> None:
        self.records: dict[str, Listen] = {}
        self.by_topic: dict[bytes, Listen] = {}
        self.idle: dict[str, Listen] = {}
        """The records that may be let go, oldest touch first (a touch moves one to the end):
        a look stops at the first one still in its grace. One held by a subscriber leaves it,
        and comes back when that subscriber's release touches it."""
        self._looking: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self.confirmed: asyncio.Future[None] = self._loop.create_future()
        self.confirmed.set_result(None)
        self._background: set[asyncio.Task[None]] = set()
        self.history = Histories(settings.history_size, settings.history_ttl, unstarted(""))
        """The histories of the channels followed here; `history.unstarted` is the unstarted
        epoch of the Redis database's generation, read at every connect."""

    def shard_of(self, name: str) -> Shard | None:
        raise NotImplementedError

    async def generation(self, shard: Shard) -> str:
        """The database's generation (see GENERATION_KEY), set if missing."""
        return await read_generation(shard.client)

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

    def unrouted(self, exc: BaseException) -> None:
        """A command failed without losing its connection (a cluster redirects it here)."""
        log.warning("Redis refused a command: %s", exc)

    def _listen(self, name: str) -> Listen:
        rec = self.records.get(name)
        if rec is None:
            shard = self.shard_of(name)
            topic = self.keys.topic(name)
            if shard is None:
                confirmed = self._loop.create_future()
                fail(confirmed)
            else:
                confirmed = shard.subscribe(topic)
            rec = Listen(Sequencer(name, self.history, self.sink), topic, shard, confirmed)
            self.records[name] = self.by_topic[topic] = rec
        elif _failed(rec.confirmed) and rec.shard is not None and rec.shard.link.connected:
            rec.confirmed = rec.shard.subscribe(rec.topic)  # a failed SUBSCRIBE is tried again
        self._touch(rec)
        return rec

    async def _confirmed(self, records: Sequence[Listen]) -> None:
        """Wait for the SUBSCRIBE confirmations. They are shared by every subscriber of a
        channel, so a waiter that is cancelled (its client left) must leave them untouched:
        `asyncio.wait` never cancels what it waits for.

        Redis confirms in the order it was asked, so a link whose count of confirmations moved
        in the last `CONFIRM_TIMEOUT` is still working through those asked first, and is
        waited for: 192,000 channels subscribed at once take it longer than that, and losing
        the link then refused two thirds of them. One that confirmed nothing for that long is
        lost."""
        pending = {r.confirmed for r in records if not r.confirmed.done()}
        while pending:
            counts = {r.shard: r.shard.link.confirmed for r in records if r.shard is not None}
            _, pending = await asyncio.wait(pending, timeout=CONFIRM_TIMEOUT)
            stalled = {
                r.shard
                for r in records
                if r.confirmed in pending
                and r.shard is not None
                and r.shard.link.confirmed == counts.get(r.shard)
            }
            if stalled:
                exc = RedisTimeoutError("Redis did not confirm SUBSCRIBE")
                for shard in stalled:
                    shard.link.lose(exc)
                raise exc
        for r in records:
            r.confirmed.result()

    @contextlib.contextmanager
    def waited(self, records: Sequence[Listen]) -> Iterator[None]:
        """Subscribers wait on `records` (their confirmations, then their first read): none of
        them is let go meanwhile. The grace after the last subscriber began at `_listen`, and
        192,000 channels subscribed at once wait longer than it: letting a confirmed channel go
        before its read left the read to load a history no record held, never let go (9,903
        of them 60 s after such a flood), under a subscriber no notification reached."""
        for rec in records:
            rec.waiting += 1
        try:
            yield
        finally:
            for rec in records:
                rec.waiting -= 1

    def _subscribed(self, topic: bytes) -> None:
        rec = self.by_topic.get(topic)
        if rec is not None and not rec.confirmed.done():
            rec.confirmed.set_result(None)
            rec.confirmed = self.confirmed  # its waiters hold the one they wait on

    def _touch(self, rec: Listen) -> None:
        self._queue(rec, self._loop.time())
        if self._looking is None:
            self._looking = self._loop.call_later(GRACE, self._look)

    def _look(self) -> None:
        """Stop listening to the channels that have had no local subscriber for the grace
        time; keep those a subscriber holds or still waits for."""
        self._looking = None
        now = self._loop.time()
        due = list(
            itertools.islice(
                itertools.takewhile(lambda r: r.touched + GRACE <= now, self.idle.values()), SWEEP
            )
        )
        for rec in due:
            if self.sink.audience(rec.name):
                del self.idle[rec.name]  # the last one to leave calls release(): a touch
            elif (
                rec.waiting
                or rec.order.reading
                or (not rec.order.loaded and not rec.confirmed.done())
            ):
                self._queue(rec, now)  # looked at again after another grace
            else:
                self._let_go(rec)
        if due:
            for table in (self.records, self.by_topic, self.history, self.idle):
                refit(table)  # a look at its size; a copy only once most of it has gone
        if self.idle and self._looking is None:
            first = next(iter(self.idle.values()))
            delay = 0.0 if len(due) == SWEEP else max(first.touched + GRACE - now, PERIOD)
            self._looking = self._loop.call_later(delay, self._look)

    def _queue(self, rec: Listen, now: float) -> None:
        rec.touched = now
        self.idle.pop(rec.name, None)
        self.idle[rec.name] = rec

    def _let_go(self, rec: Listen) -> None:
        del self.records[rec.name]
        del self.by_topic[rec.topic]
        del self.idle[rec.name]
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
        """Read and apply the channels still followed: one let go since it was asked for (a
        resync's, a notification's) has no record to let its history go with."""
        records = [rec for rec in records if self.records.get(rec.name) is rec]
        if not records:
            return
        froms = [rec.order.read_from() for rec in records]
        try:
            results = await shard.read([rec.name for rec in records], froms)
        except DOWN_ERRORS as exc:
            shard.link.lose(exc)
            raise
        finally:
            for rec in records:
                rec.order.done_reading()
        again, lost = [], []
        for rec, asked, (found, last, entries, tag) in zip(records, froms, results, strict=True):
            if rolled_back(asked, found, int(last)):
                lost.append((rec, asked))
                continue
            current: bytes = found or self.history.unstarted.encode() + tag  # no keys: unstarted
            ordered = reversed(entries) if asked[1] < 0 else entries
            messages = stream_messages(rec.name, current, ordered)
            if rec.order.apply(asked, current.decode(), int(last), messages):
                again.append(rec)
        if again:
            self.spawn(self._refresh(again))
        if lost:
            await self._end_epochs(shard, lost)

    async def _end_epochs(self, shard: Shard, lost: list[tuple[Listen, tuple[str, int]]]) -> None:
        """Detection by position: Redis holds these channels' epochs with fewer ids than this
        node saw (a failover to a replica that lacked them), so their counters would hand those
        ids out again. End each epoch (unless another node did), then read the new one: the
        subscribers get an epoch gap, and the lost ids are never delivered under the old one."""
        log.warning(
            "Redis at %s lacks ids this node delivered in %d channels (%s...); their epochs end",
            shard.name,
            len(lost),
            lost[0][0].name,
        )
        try:
            await shard.end_epochs([rec.name for rec, _ in lost], [seen for _, seen in lost])
        except DOWN_ERRORS as exc:
            shard.link.lose(exc)
            raise
        await self._refresh([rec for rec, _ in lost])

    def dropped(self, shard: Shard, slot: int, topic: bytes | None) -> bool:
        """`shard` no longer sends this node `topic` (a `sunsubscribe` it pushed: the topic's
        slot left it, or was assigned to it again, which drops its subscribers too), or refused
        to subscribe to a topic in `slot` (MOVED). Those channels count as unsubscribed, so the
        next `rehome` subscribes them again where the slot map says, on `shard` itself if the
        slot is still there, and reads what they missed. Whether any channel was."""
        if topic is not None:
            rec = self.by_topic.get(topic)
            hit = [] if rec is None or rec.shard is not shard else [rec]
        else:
            hit = [
                r for r in self.records.values() if r.shard is shard and key_slot(r.topic) == slot
            ]
        for rec in hit:
            if rec.confirmed.done():
                rec.confirmed = self._loop.create_future()
            fail(rec.confirmed)
        return bool(hit)

    def rehome(self) -> None:
        """Move every channel whose shard changed (a failover, a migrated slot), and subscribe
        again every channel its shard dropped (`dropped`): subscribe on its shard, then read it
        there, so what was published in between is delivered."""
        for rec in list(self.records.values()):
            owner = self.shard_of(rec.name)
            if owner is rec.shard and not (
                owner is not None and owner.link.up and _failed(rec.confirmed)
            ):
                continue
            old, rec.shard = rec.shard, owner
            log.debug("channel %s moved to %s", rec.name, owner and owner.name)
            if old is not None and old is not owner:
                old.link.send("UNSUBSCRIBE", rec.topic)
            if owner is None:
                fail(rec.confirmed)
                continue
            rec.confirmed = owner.subscribe(rec.topic)
            if rec.order.loaded:
                self.spawn(self._caught_up(rec.name))

    async def _caught_up(self, name: str) -> None:
        rec = self.records.get(name)
        if rec is not None:
            await self._confirmed([rec])
            await self._refresh([rec])
