"""The Redis engine's facade: publish, follow channels for subscribers, channel info.

Each node SUBSCRIBEs only to the channels it holds subscribers for (`Listen`), and applies what
it learns through a `Sequencer` per channel, strictly in id order: a notification that skips ids
(lost while reconnecting, or overtaken by another node's read) is queued and the missing ids are
read from the stream; when they are gone, or Redis lost the channel (a new epoch), the sink is
told of the jump and its subscribers get a gap instead of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...config import Settings
from ...core.broker import ChannelInfo, Item
from ...core.errors import Unavailable, broker_down, outcome_unknown
from ...core.history import Histories
from ...core.messages import Message
from ...core.positions import Position, unstarted
from ..ordering import Sequencer
from ..sinks import Reporting
from .coalesce import Coalescer
from .link import BATCH, CLOSE_TIMEOUT, DOWN_ERRORS, Link
from .pipe import Pipe, Script
from .scripts import (
    FORGOTTEN_KEY,
    GENERATION_KEY,
    PUBLISH_LUA,
    STARTS_KEY,
    SYNC_LUA,
    history_key,
    idempotency_key,
    meta_key,
    notification,
    stream_messages,
    topic_prefix,
)

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
POOL_SIZE = 32
"""Redis connections per process for reads; publishes have a connection of their own (`pipe`)."""
REPLY_TIMEOUT = 5.0
CONNECT_TIMEOUT = 2.0


class Listen:
    """This node's subscription to one channel's notifications, and its order."""

    __slots__ = ("confirmed", "name", "order", "timer", "topic", "touched")

    def __init__(self, order: Sequencer, topic: bytes, confirmed: asyncio.Future[None]) -> None:
        self.name = order.name
        self.order = order
        self.topic = topic
        self.confirmed = confirmed
        self.timer: asyncio.TimerHandle | None = None
        self.touched = 0.0


def _fail(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(RedisConnectionError("connection to Redis lost"))
        future.exception()  # retrieved: nobody may be waiting


def _failed(future: asyncio.Future[None]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def _down() -> Unavailable:
    return broker_down("redis", RETRY_AFTER)


def _behind(rec: Listen, positions: Mapping[str, Position]) -> bool:
    """Whether the subscriber's position in `rec`'s channel is ahead of this node."""
    position = positions.get(rec.name)
    return position is not None and rec.order.behind(*position)


class RedisBroker(Reporting):
    name = "redis"

    def __init__(self, settings: Settings) -> None:
        assert settings.redis
        self.history_size = settings.history_size
        self.history_ttl = settings.history_ttl
        self.history_ms = max(1, int(settings.history_ttl * 1000))
        self.meta_ms = int(max(2 * settings.history_ttl, META_TTL_MIN) * 1000)
        pool = BlockingConnectionPool.from_url(
            settings.redis,
            max_connections=POOL_SIZE,
            timeout=5,
            protocol=2,
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=REPLY_TIMEOUT,
        )
        self.client = Redis(connection_pool=pool)
        self.topic_prefix = topic_prefix(pool.connection_kwargs.get("db", 0))
        self._pipe = Pipe(pool.make_connection(), REPLY_TIMEOUT, CONNECT_TIMEOUT)
        self._publish = Script(PUBLISH_LUA)
        self._publishing: Coalescer[Item, list[Any]] = Coalescer(self._run_publish)
        self._sync = Script(SYNC_LUA)
        self.records: dict[str, Listen] = {}
        self.by_topic: dict[bytes, Listen] = {}
        self._loop = asyncio.get_running_loop()
        self._background: set[asyncio.Task[None]] = set()
        self.history = Histories(settings.history_size, settings.history_ttl, unstarted(""))
        """The histories of the channels followed here; `history.unstarted` is the unstarted
        epoch of the Redis database's generation, read at every connect."""
        self.link = Link(
            self.client, settings.redis, self._notified, self._subscribed, self._resync, self._lost
        )

    @property
    def healthy(self) -> bool:
        return self.link.up

    # -- connection ---------------------------------------------------------------------------

    async def start(self) -> None:
        await self.link.start()

    async def stop(self) -> None:
        await self.link.close()
        self._pipe.close()
        for task in list(self._background):
            task.cancel()
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await asyncio.wait_for(self.client.aclose(), CLOSE_TIMEOUT)

    async def _resync(self) -> int:
        """After a (re)connect: subscribe to every channel followed here, then read what was
        missed, in batches."""
        await self.client.set(GENERATION_KEY, secrets.token_hex(5), nx=True)
        generation = await self.client.get(GENERATION_KEY)
        if not isinstance(generation, bytes):
            raise RedisConnectionError("Redis lost the generation key as it was set")
        self.history.unstarted = unstarted(generation.decode())
        records = list(self.records.values())
        for rec in records:
            rec.confirmed = self._loop.create_future()
            self.link.send("SUBSCRIBE", rec.topic)
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            await self._confirmed(chunk)
            await self._refresh(chunk)
        return len(records)

    def _lost(self) -> None:
        for rec in self.records.values():
            _fail(rec.confirmed)

    # -- publishing ---------------------------------------------------------------------------

    def publish(self, items: Sequence[Item]) -> Coroutine[Any, Any, list[Message]]:
        return self._published(items)  # ids come from Redis: always a wait

    async def _published(self, items: Sequence[Item]) -> list[Message]:
        if not self.link.up:
            raise _down()
        try:
            assigned = await self._publishing.submit(items)
        except DOWN_ERRORS as exc:
            # The script may have run before the reply was lost: only a retry with the same
            # key can tell, so this is never answered as "not published".
            self.link.lose(exc)
            raise outcome_unknown("redis", RETRY_AFTER) from None
        except RedisError as exc:
            log.warning("publish failed: %s", exc)
            raise _down() from None
        out = []
        for (name, data, _), (epoch, id_, ts, repeat) in zip(items, assigned, strict=True):
            message = Message(name, epoch.decode(), int(id_), float(ts), data)
            rec = self.records.get(name)
            if not repeat and rec is not None and rec.order.loaded:
                rec.order.offer(message, fetch=False)
            out.append(message)
        return out

    async def _run_publish(self, items: list[Item]) -> list[Any]:
        """One script call for the items of every publish waiting (see `coalesce`)."""
        keys: list[str] = []
        args: list[Any] = [
            secrets.token_hex(5),
            self.history_size,
            self.history_ms,
            self.meta_ms,
            repr(time.time()),
            self.topic_prefix,
            NAMES_KEPT,
        ]
        for name, data, key in items:
            keys += (meta_key(name), history_key(name), idempotency_key(name, key or ""))
            args += (name, data, key or "")
        keys += (STARTS_KEY, FORGOTTEN_KEY)
        assigned: list[Any] = await self._pipe.script(self._publish, keys, args)
        return assigned

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
            if not self.link.connected:
                raise _down()
            try:
                await self._confirmed(stale)
                await self._refresh(stale)
            except DOWN_ERRORS as exc:
                self.link.lose(exc)
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
        try:
            if rec is not None and rec.order.loaded:
                if self.link.up:
                    await self._refresh([rec])
                return self.history.info(name)
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(meta_key(name), "e", "i")
            pipe.xrevrange(history_key(name), count=self.history_size)
            (epoch, last), entries = await pipe.execute()
        except DOWN_ERRORS as exc:
            self.link.lose(exc)
            raise _down() from None
        if epoch is None:
            return None
        cutoff = time.time() - self.history_ttl
        kept = [m for m in stream_messages(name, epoch, entries) if m.ts >= cutoff]
        return ChannelInfo(epoch.decode(), int(last or 0), len(kept))

    def _listen(self, name: str) -> Listen:
        rec = self.records.get(name)
        if rec is None:
            topic = (self.topic_prefix + name).encode()
            rec = Listen(Sequencer(name, self.history, self.sink), topic, self._subscribe(topic))
            self.records[name] = self.by_topic[topic] = rec
        elif _failed(rec.confirmed) and self.link.connected:
            rec.confirmed = self._subscribe(rec.topic)  # a failed SUBSCRIBE is tried again
        self._touch(rec)
        return rec

    def _subscribe(self, topic: bytes) -> asyncio.Future[None]:
        """Send SUBSCRIBE; the future is its confirmation (failed at once when not connected)."""
        confirmed = self._loop.create_future()
        if not self.link.send("SUBSCRIBE", topic):
            _fail(confirmed)
        return confirmed

    async def _confirmed(self, records: Sequence[Listen]) -> None:
        """Wait for the SUBSCRIBE confirmations. They are shared by every subscriber of a
        channel, so a waiter that is cancelled (its client left) must leave them untouched:
        `asyncio.wait` never cancels what it waits for."""
        waiting = {r.confirmed for r in records if not r.confirmed.done()}
        if waiting:
            _, pending = await asyncio.wait(waiting, timeout=CONFIRM_TIMEOUT)
            if pending:
                raise RedisTimeoutError("Redis did not confirm SUBSCRIBE")
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
        self.link.send("UNSUBSCRIBE", rec.topic)

    # -- applying messages in id order -----------------------------------------------------------

    def _notified(self, topic: bytes, payload: bytes) -> None:
        rec = self.by_topic.get(topic)
        if rec is None:
            return
        need = False
        for message in notification(rec.name, payload):
            need = rec.order.offer(message) or need
        if need:
            self._spawn(self._refresh([rec]))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                self.link.lose(exc)

    async def _refresh(self, records: Sequence[Listen]) -> None:
        """Read each channel's epoch and the messages this node has not seen, and apply them."""
        froms = [rec.order.read_from() for rec in records]
        try:
            results = await self._synced(records, froms)
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
            self._spawn(self._refresh(again))

    async def _synced(
        self, records: Sequence[Listen], froms: Sequence[tuple[str, int]]
    ) -> list[Any]:
        """The sync script's reply for each channel, all in one round trip. The script goes by
        its digest, and whole only when Redis lacks it: a pipeline given redis-py's `Script`
        asks `SCRIPT EXISTS` first, a round trip more for every read."""
        try:
            return await self._sync_calls(records, froms).execute()
        except NoScriptError:
            await self.client.script_load(self._sync.text)
        return await self._sync_calls(records, froms).execute()

    def _sync_calls(self, records: Sequence[Listen], froms: Sequence[tuple[str, int]]) -> Pipeline:
        pipe = self.client.pipeline(transaction=False)
        for rec, (epoch, after) in zip(records, froms, strict=True):
            keys = (meta_key(rec.name), history_key(rec.name), STARTS_KEY, FORGOTTEN_KEY)
            args = (self.meta_ms, after, self.history_size, epoch, rec.name)
            pipe.evalsha(self._sync.sha, len(keys), *keys, *args)
        return pipe
