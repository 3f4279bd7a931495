"""The embedded broker: ids and history live in this process, in the hub's own channels."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from array import array
from collections.abc import Mapping, Sequence

from ..core.broker import ChannelInfo, Item
from ..core.idempotency import KeyMemory, Published
from ..core.messages import Message
from ..core.positions import Position, epoch_tag, is_unstarted, unstarted
from .sinks import Reporting

NAMES_KEPT = 1 << 14
"""Channels whose ended epochs are counted by name: the latest to end one."""
SLOTS = 1 << 16
"""Slots (by name hash) counting the names forgotten past `NAMES_KEPT`, 8 bytes each."""


class MemoryBroker(Reporting):
    """One process, no dependencies: the sink's local state is the whole truth. A channel's
    epoch is made at its first message, new on every start (and after the channel was dropped
    while idle), so a cursor from before is recognised as stale and answered with an `epoch`
    gap; a channel only subscribed to stays unstarted (`core.positions.unstarted`) and can be
    dropped as soon as nobody holds it.

    A started channel dropped while idle ends its epoch, so its unstarted epoch's tag counts the
    epochs it ended: a cursor from before one never passes for one taken before the next. That
    count is kept for the latest `NAMES_KEPT` channels only; a name forgotten counts in its slot
    instead, which changes the tag of every name there (a rare gap too many, never one too few).
    """

    name = "memory"
    healthy = True

    def __init__(self, history_ttl: float) -> None:
        self._boot = secrets.token_hex(4)
        self.unstarted = unstarted(self._boot)
        self._keys = KeyMemory(history_ttl)
        self._counter = itertools.count(1)
        self._ended: dict[str, int] = {}
        """Epochs ended per channel, the one that ended one longest ago first."""
        self._forgotten = array("Q", bytes(8 * SLOTS))
        """Names forgotten from `_ended`, per slot."""

    def _state(self, name: str) -> Position:
        state = self.sink.state(name)
        if state is None:
            state = Position(unstarted(self._boot, self._tag(name)), 0)
            self.sink.load(name, state.epoch, 0, ())
        return state

    def _slot(self, name: str) -> int:
        return hash(name) % len(self._forgotten)

    def _tag(self, name: str) -> str:
        return epoch_tag(self._forgotten[self._slot(name)], self._ended.get(name, 0))

    def dropped(self, name: str) -> None:
        ended = self._ended
        ended[name] = ended.pop(name, 0) + 1  # now the latest to end one
        if len(ended) > NAMES_KEPT:
            forgotten = next(iter(ended))
            del ended[forgotten]
            self._forgotten[self._slot(forgotten)] += 1

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def publish(self, items: Sequence[Item]) -> list[tuple[Message, int]]:
        out = self.publish_now(items)
        # One yield lets the flush write to subscribers before the publisher's answer is built
        # and sent, which takes that answer off every delivery's latency.
        await asyncio.sleep(0)
        return out

    def publish_now(self, items: Sequence[Item]) -> list[tuple[Message, int]]:
        sink = self.sink
        now = time.time()
        out = []
        for name, data, key in items:
            seen = None if key is None else self._keys.get(name, key)
            if seen is not None:
                message = Message(name, seen.epoch, seen.id, seen.ts, data)
            else:
                epoch, last_id = self._state(name)
                if is_unstarted(epoch):  # tagged as the unstarted epoch it begins after
                    epoch = f"{self._boot}{next(self._counter):x}{epoch[len(self.unstarted) :]}"
                message = Message(name, epoch, last_id + 1, now, data)
                sink.append(message)
                if key is not None:
                    self._keys.put(name, key, Published(epoch, message.id, now))
            out.append((message, sink.audience(name)))
        return out

    async def follow(self, names: Sequence[str], positions: Mapping[str, Position]) -> None:
        self.follow_now(names, positions)

    def follow_now(self, names: Sequence[str], positions: Mapping[str, Position]) -> bool:
        for name in names:
            self._state(name)
        return True

    def current(self, name: str) -> bool:
        return True  # the hub's channels are the history

    def following(self, name: str) -> bool:
        return False

    def release(self, names: Sequence[str]) -> None:
        return None

    async def info(self, name: str) -> ChannelInfo | None:
        return self.sink.snapshot(name)
