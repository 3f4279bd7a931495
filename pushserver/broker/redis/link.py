"""The Redis engine's subscriber connection: connect, resubscribe, ping, reconnect with backoff.

What arrives (notifications, SUBSCRIBE confirmations) and what happens on connect and on loss
are callbacks into the engine; this module knows nothing of channels or messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.crc import key_slot
from redis.exceptions import AskError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...redis_urls import redacted

log = logging.getLogger("pushserver.redis")

PING_INTERVAL = 5.0
"""Seconds between pings on the subscriber connection; three missed replies mean Redis is gone."""
CLOSE_TIMEOUT = 2.0
"""Closing a connection can wait forever for the socket (redis-py #3941); never hold shutdown."""
BATCH = 1000
"""Channels per SUBSCRIBE command."""
DOWN_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)
SHARDED = {"SUBSCRIBE": "SSUBSCRIBE", "UNSUBSCRIBE": "SUNSUBSCRIBE"}
"""A cluster's commands: sharded pub/sub, served by the primary of the topic's slot."""


async def bounded(closing: Awaitable[object]) -> None:
    """Await `closing` for `CLOSE_TIMEOUT` at most, then leave it cancelled; what it raised is
    dropped (a close reports nothing anyone acts on). Not `wait_for`: past its timeout that
    waits for the cancelled task to end, and one that does not end held it for good."""
    task = asyncio.ensure_future(closing)
    task.add_done_callback(_dropped)
    try:
        await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
    finally:
        task.cancel()


def _dropped(task: asyncio.Future[object]) -> None:
    if not task.cancelled():
        task.exception()


class Link:
    """Keeps one pub/sub connection to Redis up, logging once per outage.

    `resync` runs after every (re)connect, before the link counts as up: the engine subscribes
    again and reads what it missed. `lost` runs whenever the connection goes. A `sharded` link
    (a cluster's primary) uses SSUBSCRIBE, one slot per command, and hands `moved` the slot and
    topic of a `sunsubscribe` (the server sends one unasked when the topic's slot leaves it, or
    is assigned to it again), and the slot of a MOVED answer to SSUBSCRIBE or SUNSUBSCRIBE (the
    slot left it before this node knew): the connection stays, its other topics unharmed.
    """

    def __init__(
        self,
        client: Redis,
        url: str,
        on_message: Callable[[bytes, bytes], None],
        on_subscribed: Callable[[bytes], None],
        resync: Callable[[], Awaitable[int]],
        lost: Callable[[], None],
        moved: Callable[[int, bytes | None], None] | None = None,
    ) -> None:
        self.client = client
        self.url = redacted(url)
        self._moved = moved
        self._on_message = on_message
        self._on_subscribed = on_subscribed
        self._resync = resync
        self._lost_callback = lost
        self._loop = asyncio.get_running_loop()
        self._pubsub: PubSub | None = None
        self._queue: asyncio.Queue[tuple[str, bytes | None]] | None = None
        self._io: list[asyncio.Task[None]] = []
        self._monitor: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self.connected = False
        """The pub/sub connection is open (commands can be queued)."""
        self.up = False
        """Connected and resynchronised: publishing and subscribing work."""
        self.closing = False
        self.confirmed = 0
        """SUBSCRIBE confirmations read, counted: while it moves, one awaited is on its way."""
        self._last_read = 0.0

    async def start(self) -> None:
        """Connect (or start retrying in the background: /healthz says 503 until Redis answers)."""
        self._monitor = asyncio.create_task(self._watch())
        await self._first_attempt.wait()

    async def close(self) -> None:
        self.closing = True  # the client may turn a cancellation into a connection error
        if self._monitor is not None:
            self._monitor.cancel()
            await bounded(self._monitor)
        await self._teardown()

    def send(self, command: str, topic: bytes) -> bool:
        """Queue SUBSCRIBE/UNSUBSCRIBE; False when not connected (a reconnect resubscribes)."""
        if not self.connected or self._queue is None:
            return False
        self._queue.put_nowait((command, topic))
        return True

    def lose(self, exc: BaseException) -> None:
        """The connection is broken (noticed here or by a command that failed)."""
        if self.connected or self.up:
            log.debug("Redis connection lost: %r", exc)
        self.connected = self.up = False
        self._lost.set()
        self._lost_callback()

    async def _watch(self) -> None:
        down_since: float | None = None
        delay = 0.05
        while not self.closing:
            try:
                resynced = await self._connect()
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
                    resynced,
                )
            down_since, delay = None, 0.05
            self._first_attempt.set()
            await self._keep_alive()
            await self._teardown()

    async def _connect(self) -> int:
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
        self.connected = True
        resynced = await self._resync()
        if self._lost.is_set():
            raise RedisConnectionError("connection to Redis lost while resubscribing")
        self.up = True
        return resynced

    async def _keep_alive(self) -> None:
        """Wait for a loss; ping meanwhile so a silent Redis is noticed too."""
        while not self._lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), PING_INTERVAL)
                return
            if self._loop.time() - self._last_read > 3 * PING_INTERVAL:
                self.lose(RedisTimeoutError("no reply from Redis"))
            elif self._queue is not None:
                self._queue.put_nowait(("PING", None))

    async def _teardown(self) -> None:
        self.connected = self.up = False
        self._lost_callback()
        io, self._io = self._io, []
        for task in io:
            task.cancel()
        for task in io:
            await bounded(task)
        pubsub, self._pubsub, self._queue = self._pubsub, None, None
        if pubsub is not None:
            await bounded(pubsub.aclose())

    async def _read(self, pubsub: PubSub) -> None:
        try:
            while True:
                try:
                    response = await pubsub.parse_response(block=True)
                except AskError as exc:  # MOVED too
                    if self._moved is None:
                        raise
                    response = None
                    self._moved(exc.slot_id, None)
                self._last_read = self._loop.time()
                if not isinstance(response, list):
                    continue
                kind = response[0]
                if kind in (b"message", b"smessage"):
                    self._on_message(response[1], response[2])
                elif kind in (b"subscribe", b"ssubscribe"):
                    self.confirmed += 1
                    self._on_subscribed(response[1])
                elif kind == b"sunsubscribe" and self._moved is not None:
                    self._moved(key_slot(response[1]), response[1])
        except (RedisError, OSError, RuntimeError) as exc:
            self.lose(exc)

    async def _write(self, pubsub: PubSub, queue: asyncio.Queue[tuple[str, bytes | None]]) -> None:
        """SUBSCRIBE/UNSUBSCRIBE in the order they were decided, consecutive ones batched."""
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                for command, group in itertools.groupby(items, key=lambda item: item[0]):
                    topics = [t for _, t in group if t is not None]
                    if self._moved is None:
                        batches = [topics[at : at + BATCH] for at in range(0, len(topics), BATCH)]
                    else:
                        command = SHARDED.get(command, command)
                        batches = [list(g) for _, g in itertools.groupby(topics, key=key_slot)]
                    for batch in batches or [[]]:
                        await pubsub.execute_command(command, *batch)
        except (RedisError, OSError) as exc:
            self.lose(exc)
