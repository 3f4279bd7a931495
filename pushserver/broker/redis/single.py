"""The engine on one Redis: one shard, whose publishes go over the project's own pipe.

The pipe (`pipe.py`) costs the server 34-51 % less CPU per publish than redis-py does
(docs/performance.md), so one Redis keeps it; it routes nothing.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

from redis.asyncio import Redis

from ...config import Settings
from ...core.broker import Item
from ...core.messages import Message
from .engine import Engine
from .pipe import Pipe
from .scripts import Keys
from .shard import CONNECT_TIMEOUT, REPLY_TIMEOUT, Shard, read_pool


class RedisBroker(Engine):
    """One Redis: one shard, whose publishes go over the project's own pipe (`pipe`)."""

    def __init__(self, settings: Settings) -> None:
        pool = read_pool(settings.redis)
        self.keys = Keys(pool.connection_kwargs.get("db", 0))
        super().__init__(settings)
        client = Redis(connection_pool=pool)
        pipe = Pipe(pool.make_connection(), REPLY_TIMEOUT, CONNECT_TIMEOUT)
        self.shard = self.make_shard("redis", client, pipe, settings.redis)
        self._publishing = self.shard.publishing(0)

    @property
    def shards(self) -> list[Shard]:
        return [self.shard]

    def shard_of(self, name: str) -> Shard | None:
        return self.shard

    @property
    def healthy(self) -> bool:
        """Asked on every publish: the one shard's link, without a list of one to go over."""
        return self.shard.link.up

    def publish(self, items: Sequence[Item]) -> Coroutine[Any, Any, list[Message]]:
        """Straight to the one shard's one slot: nothing to group or look up per publish."""
        return self._submitted(self.shard, self._publishing, items)

    async def start(self) -> None:
        await self.shard.link.start()
