"""The embedded broker: ids and history live in this process, fan-out is a direct call."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Mapping, Sequence

from ..channel import Channel
from ..config import Settings
from ..frames import Message
from ..hub import Hub
from ..names import Position


class MemoryBroker:
    """One process, no dependencies. Epochs are new on every start, so cursors from a previous
    run are recognised as stale and answered with an `epoch` gap."""

    name = "memory"
    healthy = True

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    @classmethod
    def create(cls, settings: Settings, hub_factory: type[Hub]) -> tuple[MemoryBroker, Hub]:
        boot = secrets.token_hex(4)
        counter = itertools.count(1)
        hub = hub_factory(
            history_size=settings.history_size,
            history_ttl=settings.history_ttl,
            max_buffer_bytes=settings.max_buffer_bytes,
            max_flush_delay=settings.max_flush_delay,
            new_epoch=lambda name: f"{boot}{next(counter):x}",
        )
        return cls(hub), hub

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def publish(self, items: Sequence[tuple[str, bytes]]) -> list[tuple[Message, int]]:
        hub = self.hub
        ttl = hub.history_ttl
        now = time.time()
        out = []
        for name, data in items:
            ch = hub.channel(name)
            ch.last_id += 1
            message = Message(name, ch.epoch, ch.last_id, now, data)
            ch.history.append(message)
            ch.expire(ttl, now)
            ch.idle_since = time.monotonic()
            out.append((message, ch.subscriber_count))
        hub.dispatch(m for m, _ in out)
        # One yield lets the flush write to subscribers before the publisher's answer is built
        # and sent, which takes that answer off every delivery's latency.
        await asyncio.sleep(0)
        return out

    async def channels(
        self, names: Sequence[str], positions: Mapping[str, Position] | None = None
    ) -> list[Channel]:
        return [self.hub.channel(n) for n in names]

    def release(self, channels: Sequence[Channel]) -> None:
        return None

    async def info(self, name: str) -> Channel | None:
        ch = self.hub.channels.get(name)
        if ch is not None:
            ch.expire(self.hub.history_ttl)
        return ch
