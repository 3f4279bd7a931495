"""The Redis broker: ids, history and fan-out shared by every process and node on one Redis.

One Lua script assigns a channel's next id, appends the message to the channel's stream and
PUBLISHes it whole, so nodes publishing to one channel never clash and a node needs no extra read
to deliver. Each node SUBSCRIBEs only to the channels it holds subscribers for.

The local Channel is a cache of what this node dispatched. Messages are applied strictly in id
order: a notification that skips ids (lost while reconnecting, or overtaken by another node's
read) is queued and the missing ids are read from the stream; when they are gone, or Redis lost
the channel (a new epoch), the subscribers held here get a gap instead of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..channel import Channel
from ..config import Settings
from ..errors import ApiError, unavailable
from ..frames import Gap, Message
from ..hub import Hub
from ..names import Position
from ..subscriber import StreamSubscriber, Subscription, Waiter

log = logging.getLogger("pushserver.redis")

GRACE = 3.0
"""Seconds a channel stays subscribed after its last local subscriber, so re-polls do not churn."""
PING_INTERVAL = 5.0
"""Seconds between pings on the subscriber connection; three missed replies mean Redis is gone."""
CONFIRM_TIMEOUT = 5.0
CLOSE_TIMEOUT = 2.0
"""Closing a connection can wait forever for the socket (redis-py #3941); never hold shutdown."""
META_TTL_MIN = 86400.0
"""A channel's epoch and id counter outlive its history, so an old cursor gets an exact gap."""
RETRY_AFTER = 2
POOL_SIZE = 32
"""Redis connections per process; more concurrent publishes wait for one (scripts are short)."""
BATCH = 1000
"""Channels per SUBSCRIBE command and per pipeline when resynchronising after a reconnect."""
DOWN_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)

# Shared by both scripts: find the channel's epoch, or start a new one (and drop any history
# left from the old one, whose ids would clash with the new ones).
EPOCH_LUA = """
local function epoch_of(meta, hist, candidate)
  local epoch = redis.call('HGET', meta, 'e')
  if not epoch then
    epoch = candidate
    redis.call('DEL', hist)
    redis.call('HSET', meta, 'e', epoch, 'i', 0)
  end
  return epoch
end
"""

# KEYS: meta, history per item. ARGV: epoch candidate, history size, history ttl ms, meta ttl ms,
# ts, topic prefix, then name, data per item.
PUBLISH_LUA = (
    EPOCH_LUA
    + """
local out = {}
for k = 1, (#ARGV - 6) / 2 do
  local meta, hist = KEYS[2 * k - 1], KEYS[2 * k]
  local name, data = ARGV[5 + 2 * k], ARGV[6 + 2 * k]
  local epoch = epoch_of(meta, hist, ARGV[1])
  local id = redis.call('HINCRBY', meta, 'i', 1)
  redis.call('XADD', hist, 'MAXLEN', '~', ARGV[2], id .. '-0', 't', ARGV[5], 'd', data)
  redis.call('PEXPIRE', hist, ARGV[3])
  redis.call('PEXPIRE', meta, ARGV[4])
  redis.call('PUBLISH', ARGV[6] .. name, epoch .. '\\n' .. id .. '\\n' .. ARGV[5] .. '\\n' .. data)
  out[k] = {epoch, id}
end
return out
"""
)

# KEYS: meta, history. ARGV: epoch candidate, meta ttl ms, after id (-1 = the last N), N.
SYNC_LUA = (
    EPOCH_LUA
    + """
local epoch = epoch_of(KEYS[1], KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local last = redis.call('HGET', KEYS[1], 'i')
local after = tonumber(ARGV[3])
local entries
if after < 0 then
  entries = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[4])
else
  entries = redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+')
end
return {epoch, last, entries}
"""
)


class _Listen:
    """This node's subscription to one channel's notifications, and its local cache."""

    __slots__ = (
        "channel",
        "confirmed",
        "name",
        "queue",
        "retired",
        "syncing",
        "timer",
        "topic",
        "touched",
    )

    def __init__(self, name: str, topic: bytes, confirmed: asyncio.Future[None]) -> None:
        self.name = name
        self.topic = topic
        self.channel: Channel | None = None
        self.confirmed = confirmed
        self.queue: list[Message] = []
        self.retired: set[str] = set()
        self.syncing = 0
        self.timer: asyncio.TimerHandle | None = None
        self.touched = 0.0


def _no_local_epochs(name: str) -> str:
    raise RuntimeError("with the Redis broker, channels come from Redis, not hub.channel()")


def _failed(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    future = loop.create_future()
    _fail(future)
    return future


def _fail(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(RedisConnectionError("connection to Redis lost"))
        future.exception()  # retrieved: nobody may be waiting


def _down() -> ApiError:
    return unavailable("broker_down", "redis broker is unavailable", RETRY_AFTER)


class RedisBroker:
    name = "redis"

    def __init__(self, hub: Hub, settings: Settings) -> None:
        self.hub = hub
        self.url = settings.redis
        self.history_size = settings.history_size
        self.history_ms = max(1, int(settings.history_ttl * 1000))
        self.meta_ms = int(max(2 * settings.history_ttl, META_TTL_MIN) * 1000)
        pool = BlockingConnectionPool.from_url(
            settings.redis,
            max_connections=POOL_SIZE,
            timeout=5,
            protocol=2,
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=2,
            socket_timeout=5,
        )
        self.client = Redis(connection_pool=pool)
        db = self.client.connection_pool.connection_kwargs.get("db", 0)
        self.topic_prefix = f"pushserver:{db}:"
        self._publish = self.client.register_script(PUBLISH_LUA)
        self._sync = self.client.register_script(SYNC_LUA)
        self.records: dict[str, _Listen] = {}
        self.by_topic: dict[bytes, _Listen] = {}
        self._loop = asyncio.get_running_loop()
        self._pubsub: PubSub | None = None
        self._queue: asyncio.Queue[tuple[str, bytes | None]] | None = None
        self._io: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._monitor: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._connected = False
        self._up = False
        self._closing = False
        self._last_read = 0.0

    @classmethod
    def create(cls, settings: Settings, hub_factory: type[Hub]) -> tuple[RedisBroker, Hub]:
        hub = hub_factory(
            history_size=settings.history_size,
            history_ttl=settings.history_ttl,
            max_buffer_bytes=settings.max_buffer_bytes,
            max_flush_delay=settings.max_flush_delay,
            new_epoch=_no_local_epochs,
        )
        return cls(hub, settings), hub

    @property
    def healthy(self) -> bool:
        return self._up

    # -- connection ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (or start retrying in the background: /healthz says 503 until Redis answers)."""
        self._monitor = asyncio.create_task(self._watch())
        await self._first_attempt.wait()

    async def close(self) -> None:
        self._closing = True  # the client may turn a cancellation into a connection error
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._monitor, CLOSE_TIMEOUT)
        for task in list(self._background):
            task.cancel()
        await self._teardown()
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await asyncio.wait_for(self.client.aclose(), CLOSE_TIMEOUT)

    async def _watch(self) -> None:
        """Keep the connection: reconnect with backoff, logging once per outage."""
        down_since: float | None = None
        delay = 0.05
        while not self._closing:
            try:
                await self._connect()
            except (RedisError, OSError) as exc:
                await self._teardown()
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning(
                        "Redis at %s unreachable (%s); publishing answers 503 until it is back",
                        self.url,
                        exc,
                    )
                self._first_attempt.set()
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
                continue
            if down_since is not None:
                log.warning(
                    "Redis at %s reachable again after %.1f s; %d channels resynchronised",
                    self.url,
                    time.monotonic() - down_since,
                    len(self.records),
                )
            down_since, delay = None, 0.05
            self._first_attempt.set()
            await self._keep_alive()
            await self._teardown()

    async def _connect(self) -> None:
        self._lost.clear()
        await self.client.ping()
        pubsub = self.client.pubsub()
        self._pubsub = pubsub
        await pubsub.connect()
        self._queue = asyncio.Queue()
        self._last_read = self._loop.time()
        self._io = [
            asyncio.create_task(self._read(pubsub)),
            asyncio.create_task(self._write(pubsub, self._queue)),
        ]
        self._connected = True
        records = list(self.records.values())
        for rec in records:
            rec.confirmed = self._loop.create_future()
            self._queue.put_nowait(("SUBSCRIBE", rec.topic))
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            await self._confirmed(chunk)
            await self._refresh(chunk)
        if self._lost.is_set():
            raise RedisConnectionError("connection to Redis lost while resubscribing")
        self._up = True

    async def _keep_alive(self) -> None:
        """Wait for a loss; ping meanwhile so a silent Redis is noticed too."""
        while not self._lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), PING_INTERVAL)
                return
            if self._loop.time() - self._last_read > 3 * PING_INTERVAL:
                self._lose(RedisTimeoutError("no reply from Redis"))
            elif self._queue is not None:
                self._queue.put_nowait(("PING", None))

    def _lose(self, exc: BaseException) -> None:
        if self._connected or self._up:
            log.debug("Redis connection lost: %r", exc)
        self._connected = self._up = False
        self._lost.set()
        for rec in self.records.values():
            _fail(rec.confirmed)

    async def _teardown(self) -> None:
        self._connected = self._up = False
        for rec in self.records.values():
            _fail(rec.confirmed)
        io, self._io = self._io, []
        for task in io:
            task.cancel()
        for task in io:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        pubsub, self._pubsub, self._queue = self._pubsub, None, None
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                await asyncio.wait_for(pubsub.aclose(), CLOSE_TIMEOUT)

    async def _read(self, pubsub: PubSub) -> None:
        try:
            while True:
                response = await pubsub.parse_response(block=True)
                self._last_read = self._loop.time()
                if not isinstance(response, list):
                    continue
                kind = response[0]
                if kind == b"message":
                    self._notified(response[1], response[2])
                elif kind == b"subscribe":
                    rec = self.by_topic.get(response[1])
                    if rec is not None and not rec.confirmed.done():
                        rec.confirmed.set_result(None)
        except (RedisError, OSError, RuntimeError) as exc:
            self._lose(exc)

    async def _write(self, pubsub: PubSub, queue: asyncio.Queue[tuple[str, bytes | None]]) -> None:
        """SUBSCRIBE/UNSUBSCRIBE in the order they were decided, consecutive ones batched."""
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                for command, group in itertools.groupby(items, key=lambda item: item[0]):
                    topics = [t for _, t in group if t is not None]
                    for start in range(0, max(len(topics), 1), BATCH):
                        await pubsub.execute_command(command, *topics[start : start + BATCH])
        except (RedisError, OSError) as exc:
            self._lose(exc)

    # -- publishing ---------------------------------------------------------------------------

    async def publish(self, items: Sequence[tuple[str, bytes]]) -> list[tuple[Message, int]]:
        if not self._up:
            raise _down()
        ts = time.time()
        ts_text = repr(ts)
        keys: list[str] = []
        args: list[Any] = [
            secrets.token_hex(5),
            self.history_size,
            self.history_ms,
            self.meta_ms,
            ts_text,
            self.topic_prefix,
        ]
        for name, data in items:
            keys += (f"pushserver:m:{name}", f"pushserver:h:{name}")
            args += (name, data)
        try:
            assigned = await self._publish(keys=keys, args=args)
        except DOWN_ERRORS as exc:
            self._lose(exc)
            raise _down() from None
        except RedisError as exc:
            log.warning("publish failed: %s", exc)
            raise _down() from None
        out = []
        for (name, data), (epoch, id_) in zip(items, assigned, strict=True):
            message = Message(name, epoch.decode(), int(id_), ts, data)
            rec = self.records.get(name)
            audience = 0
            if rec is not None and rec.channel is not None:
                self._offer(rec, message, fetch=False)
                audience = rec.channel.subscriber_count
            out.append((message, audience))
        return out

    # -- subscribing --------------------------------------------------------------------------

    async def channels(
        self, names: Sequence[str], positions: Mapping[str, Position] | None = None
    ) -> list[Channel]:
        """Subscribe (confirmed) before reading the stream, so nothing falls between the two;
        read again when the subscriber's cursor is ahead of what this node has seen."""
        records = [self._listen(name) for name in names]
        positions = positions or {}
        stale = [r for r in records if r.channel is None or self._behind(r, positions)]
        if stale:
            if not self._connected:
                raise _down()
            try:
                await self._confirmed(stale)
                await self._refresh(stale)
            except DOWN_ERRORS as exc:
                self._lose(exc)
                raise _down() from None
        channels = []
        for rec in records:
            ch = rec.channel
            if ch is None:
                raise _down()
            self._show(ch)
            channels.append(ch)
        return channels

    def release(self, channels: Sequence[Channel]) -> None:
        for ch in channels:
            rec = self.records.get(ch.name)
            if rec is not None:
                self._touch(rec)

    async def info(self, name: str) -> Channel | None:
        rec = self.records.get(name)
        try:
            if rec is not None and rec.channel is not None:
                if self._up:
                    await self._refresh([rec])
                return rec.channel
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(f"pushserver:m:{name}", "e", "i")
            pipe.xrevrange(f"pushserver:h:{name}", count=self.history_size)
            (epoch, last), entries = await pipe.execute()
        except DOWN_ERRORS as exc:
            self._lose(exc)
            raise _down() from None
        if epoch is None:
            return None
        ch = Channel(name, epoch.decode(), self.history_size, int(last or 0))
        ch.history.extend(self._messages(name, ch.epoch, reversed(entries)))
        ch.expire(self.hub.history_ttl)
        return ch

    def _listen(self, name: str) -> _Listen:
        rec = self.records.get(name)
        if rec is None:
            topic = (self.topic_prefix + name).encode()
            if self._connected and self._queue is not None:
                rec = _Listen(name, topic, self._loop.create_future())
                self._queue.put_nowait(("SUBSCRIBE", topic))
            else:
                rec = _Listen(name, topic, _failed(self._loop))
            self.records[name] = rec
            self.by_topic[topic] = rec
        self._touch(rec)
        return rec

    @staticmethod
    def _behind(rec: _Listen, positions: Mapping[str, Position]) -> bool:
        position = positions.get(rec.name)
        ch = rec.channel
        if position is None or ch is None:
            return False
        epoch, seen = position
        if epoch == ch.epoch:
            return seen > ch.last_id
        return epoch not in rec.retired

    async def _confirmed(self, records: Sequence[_Listen]) -> None:
        waiting = [r.confirmed for r in records if not r.confirmed.done()]
        if waiting:
            try:
                await asyncio.wait_for(asyncio.gather(*waiting), CONFIRM_TIMEOUT)
            except TimeoutError:
                raise RedisTimeoutError("Redis did not confirm SUBSCRIBE") from None
        for r in records:
            r.confirmed.result()

    def _touch(self, rec: _Listen) -> None:
        rec.touched = self._loop.time()
        if rec.timer is None:
            rec.timer = self._loop.call_later(GRACE, self._check, rec)

    def _check(self, rec: _Listen) -> None:
        """Stop listening once the channel has had no local subscriber for the grace time."""
        rec.timer = None
        if self.records.get(rec.name) is not rec:
            return
        ch = rec.channel
        if ch is not None and ch.subscriber_count:
            return  # the last one to leave calls release(), which re-arms the timer
        remaining = rec.touched + GRACE - self._loop.time()
        if rec.syncing or (ch is None and not rec.confirmed.done()):
            remaining = GRACE
        if remaining > 0:
            rec.timer = self._loop.call_later(remaining, self._check, rec)
            return
        del self.records[rec.name]
        del self.by_topic[rec.topic]
        if ch is not None and self.hub.channels.get(rec.name) is ch and not ch.pending:
            del self.hub.channels[rec.name]
        if self._connected and self._queue is not None:
            self._queue.put_nowait(("UNSUBSCRIBE", rec.topic))

    def _show(self, ch: Channel) -> None:
        """Make sure the hub holds this channel (its idle sweep may have dropped it)."""
        if self.hub.channels.get(ch.name) is not ch:
            self.hub.channels[ch.name] = ch

    # -- applying messages in id order -----------------------------------------------------------

    def _notified(self, topic: bytes, payload: bytes) -> None:
        rec = self.by_topic.get(topic)
        if rec is None:
            return
        epoch, id_, ts, data = payload.split(b"\n", 3)
        self._offer(rec, Message(rec.name, epoch.decode(), int(id_), float(ts), data), fetch=True)

    def _offer(self, rec: _Listen, message: Message, fetch: bool) -> None:
        """Dispatch the next message in order; anything else waits for a read of the stream.

        `fetch` is False for a publisher's own reply, whose notification follows anyway.
        """
        ch = rec.channel
        if ch is not None:
            if message.epoch == ch.epoch:
                if message.id <= ch.last_id:
                    return
                if message.id == ch.last_id + 1:
                    self._append(ch, message)
                    return
            elif message.epoch in rec.retired:
                return
        if not fetch:
            return
        rec.queue.append(message)
        if ch is not None and not rec.syncing:
            self._spawn(self._refresh([rec]))

    def _append(self, ch: Channel, message: Message) -> None:
        ch.last_id = message.id
        ch.history.append(message)
        ch.expire(self.hub.history_ttl, message.ts)
        self._show(ch)
        self.hub.dispatch((message,))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._lose(task.exception())  # type: ignore[arg-type]

    async def _refresh(self, records: Sequence[_Listen]) -> None:
        """Read each channel's epoch and the messages this node has not seen, and apply them."""
        afters = [-1 if r.channel is None else r.channel.last_id for r in records]
        pipe = self.client.pipeline(transaction=False)
        for rec, after in zip(records, afters, strict=True):
            await self._sync(
                keys=[f"pushserver:m:{rec.name}", f"pushserver:h:{rec.name}"],
                args=[secrets.token_hex(5), self.meta_ms, after, self.history_size],
                client=pipe,
            )
        for rec in records:
            rec.syncing += 1
        try:
            results = await pipe.execute()
        finally:
            for rec in records:
                rec.syncing -= 1
        for rec, after, (epoch, last, entries) in zip(records, afters, results, strict=True):
            ordered = reversed(entries) if after < 0 else entries
            self._apply(rec, epoch.decode(), int(last), self._messages(rec.name, epoch, ordered))

    def _messages(self, name: str, epoch: str | bytes, entries: Any) -> list[Message]:
        if isinstance(epoch, bytes):
            epoch = epoch.decode()
        out = []
        for entry_id, fields in entries:
            if not isinstance(fields, dict):
                fields = dict(zip(fields[::2], fields[1::2], strict=True))
            values = fields
            id_ = int(entry_id.split(b"-", 1)[0])
            out.append(Message(name, epoch, id_, float(values[b"t"]), values[b"d"]))
        return out

    def _apply(self, rec: _Listen, epoch: str, last: int, messages: list[Message]) -> None:
        ch = rec.channel
        if ch is None:
            ch = rec.channel = Channel(rec.name, epoch, self.history_size, last)
            ch.history.extend(messages)
            ch.expire(self.hub.history_ttl)
            self._show(ch)
        elif epoch in rec.retired:
            return  # read before one that already moved the channel to a newer epoch
        elif epoch == ch.epoch and (last <= ch.last_id or self._contiguous(ch, messages)):
            for message in messages:
                if message.id == ch.last_id + 1:
                    self._append(ch, message)
        elif ch.pending:
            # Let this iteration's flush go out before the channel jumps.
            rec.syncing += 1
            self._loop.call_soon(self._jump_later, rec, epoch, last, messages)
            return
        else:
            self._jump(rec, epoch, last, messages)
        self._replay(rec)

    @staticmethod
    def _contiguous(ch: Channel, messages: list[Message]) -> bool:
        after = [m for m in messages if m.id > ch.last_id]
        return bool(after) and after[0].id == ch.last_id + 1

    def _jump_later(self, rec: _Listen, epoch: str, last: int, messages: list[Message]) -> None:
        ch = rec.channel
        if ch is not None and ch.pending:
            self._loop.call_soon(self._jump_later, rec, epoch, last, messages)
            return
        rec.syncing -= 1
        moved = ch is not None and (epoch != ch.epoch or last > ch.last_id)
        if moved and epoch not in rec.retired:
            self._jump(rec, epoch, last, messages)
        self._replay(rec)

    def _replay(self, rec: _Listen) -> None:
        if rec.queue and not rec.syncing:
            queued, rec.queue = rec.queue, []
            for message in queued:
                self._offer(rec, message, fetch=True)

    def _jump(self, rec: _Listen, epoch: str, last: int, messages: list[Message]) -> None:
        """Redis no longer has what this node missed: move the channel to Redis's state and
        tell its subscribers exactly what they lost (an `expired` or `epoch` gap)."""
        ch = rec.channel
        assert ch is not None
        position = (ch.epoch, ch.sent_id)
        if epoch != ch.epoch:
            rec.retired.add(ch.epoch)
            log.debug("channel %r: new epoch %s in Redis (history lost)", ch.name, epoch)
        ch.epoch = epoch
        ch.last_id = ch.sent_id = last
        ch.sent_position = f"{ch.name}:{epoch}:{last}"
        ch.history.clear()
        ch.history.extend(m for m in messages if m.id <= last)
        ch.expire(self.hub.history_ttl)
        self._deliver(ch, ch.backlog(position, 0))

    def _deliver(self, ch: Channel, events: list[Message | Gap]) -> None:
        """Events outside the ordinary fan-out (gaps), to everyone held on the channel here."""
        if not events:
            return
        hub = self.hub
        held: list[Subscription] = [s for subs in ch.streams.values() for s in subs]
        held += ch.multi
        held += ch.waiters
        cut: list[StreamSubscriber] = []
        for sub in held:
            if isinstance(sub, Waiter):
                sub.resolve(sub.answer(events)[0])
                hub.remove_waiter(sub)
            elif isinstance(sub, StreamSubscriber):
                hub.write(sub, events, cut)
        hub.cut_off(cut)
