"""The engine on a master watched by Redis Sentinel: it follows the master through failovers.

The sentinels name the master (`discover_master`); the engine asks them every second and at once
when one announces `+switch-master`, and moves everything to the new master as soon as they name
it: it never waits for the old master to refuse writes (READONLY) or to cut its connections,
since a master demoted by Sentinel goes on accepting writes for seconds (measured here: ~10 s)
and those writes are lost. Until then publishes there wait for a replica the old master no
longer has (`WAIT`), so they are refused rather than acknowledged and lost. Between the switch
and the new master's resync `/healthz` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

from ...config import Settings
from .engine import Engine
from .link import CLOSE_TIMEOUT
from .scripts import Keys
from .shard import POOL_OPTIONS, Shard, closed

log = logging.getLogger("pushserver.redis")

ASK_INTERVAL = 1.0
"""Seconds between asking the sentinels who the master is."""
SWITCH = "+switch-master"


class SentinelBroker(Engine):
    name = "redis-sentinel"

    def __init__(self, settings: Settings) -> None:
        self.target = settings.redis_target
        self.keys = Keys(self.target.db)
        super().__init__(settings)
        timeouts = {k: POOL_OPTIONS[k] for k in ("socket_timeout", "socket_connect_timeout")}
        self.sentinel = Sentinel(list(self.target.hosts), sentinel_kwargs=timeouts)
        self.credentials: dict[str, Any] = {
            "username": self.target.username,
            "password": self.target.password,
        }
        self.shard: Shard | None = None
        self.address: tuple[str, int] | None = None
        self._changed = asyncio.Event()
        self._found = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def shards(self) -> list[Shard]:
        return [] if self.shard is None else [self.shard]

    def shard_of(self, name: str) -> Shard | None:
        return self.shard

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._watch())]
        self._tasks += [asyncio.create_task(self._listen_to(h, p)) for h, p in self.target.hosts]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._found.wait(), 5 * ASK_INTERVAL)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await super().stop()
        for client in self.sentinel.sentinels:
            await closed(client)

    async def _watch(self) -> None:
        unknown = False
        while True:
            self._changed.clear()
            try:
                address = await self.sentinel.discover_master(self.target.master)
            except (RedisError, OSError) as exc:
                if not unknown:
                    log.warning("no sentinel names master %r (%s)", self.target.master, exc)
                unknown = True
            else:
                unknown = False
                if address != self.address:
                    await self._switch(address)
                elif self.shard is not None and self.shard.link.up:
                    with contextlib.suppress(RedisError, OSError):
                        await self.observe(self.shard)  # replicas added since: warn
            self._found.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), ASK_INTERVAL)

    async def _switch(self, address: tuple[str, int]) -> None:
        """Leave the old master at once, for the one the sentinels name now."""
        if self.address is not None:
            log.warning("Redis master %r moved to %s:%d", self.target.master, *address)
        old, self.address = self.shard, address
        host, port = address
        url = f"redis://{host}:{port}/{self.target.db}"
        self.shard = self.open_node(url, f"{host}:{port}", **self.credentials)
        self.rehome()
        if old is not None:  # closing may hang (redis-py #3941): not on the way to the new master
            self.spawn(old.close(closed))
        await self.shard.link.start()

    async def _listen_to(self, host: str, port: int) -> None:
        """Hear a sentinel's `+switch-master` (the promotion), seconds before the old master
        is demoted; reconnect when the sentinel goes."""
        while True:
            client = Redis(host=host, port=port, socket_connect_timeout=CLOSE_TIMEOUT)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(SWITCH)
                    async for message in pubsub.listen():
                        if message["type"] == "message":
                            self._changed.set()
            except (RedisError, OSError):
                pass
            finally:
                await closed(client)
            await asyncio.sleep(ASK_INTERVAL)
