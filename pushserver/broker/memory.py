"""The embedded engine: ids and histories live in this process, and are the whole truth."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from mypy_extensions import mypyc_attr

from ..core.broker import ChannelInfo, Item
from ..core.history import Histories
from ..core.idempotency import KeyMemory, Published
from ..core.messages import Message
from ..core.positions import Position, epoch_tag, is_unstarted, unstarted
from ..core.refit import refit
from ..core.slices import slices
from .endings import EndedEpochs
from .sinks import Reporting

NAMES_KEPT = 1 << 14
"""Ends of epochs whose channels are counted by name: the latest (56 bytes each, from start)."""
SLOTS = 1 << 16
"""Slots (by name hash) counting the names forgotten past `NAMES_KEPT`, 8 bytes each."""
SWEEP_SLICE: Final = 1000
"""Channels the idle sweep looks at per loop turn, so a pass over many never holds up delivery."""


@mypyc_attr(allow_interpreted_subclasses=True)
class MemoryBroker(Reporting):
    """One process, no dependencies: its histories are the whole truth. A channel's epoch is
    made at its first message, new on every start (and after the channel was dropped while
    idle), so a cursor from before is recognised as stale and answered with an `epoch` gap; a
    channel only subscribed to stays unstarted (`core.positions.unstarted`) and goes as soon as
    nobody holds it.

    A channel whose history has expired, that nobody holds and nobody left for `idle_after`, is
    dropped by the sweep (every `sweep_interval`), which ends its epoch: its unstarted epoch's
    tag counts the epochs it ended, so a cursor from before one never passes for one taken
    before the next. That count is kept for the channels of the latest `NAMES_KEPT` ends only
    (`endings.EndedEpochs`, by hash, with no object per channel); a name forgotten counts in
    its slot instead, which changes the tag of every name there (a rare gap too many, never
    one too few).
    """

    name = "memory"
    healthy = True

    def __init__(
        self,
        history_size: int,
        history_ttl: float,
        sweep_interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        """The wall clock messages are stamped with (`Message.ts`) and expire by."""
        self._boot = secrets.token_hex(4)
        self.history = Histories(history_size, history_ttl, unstarted(self._boot))
        self.sweep_interval = sweep_interval
        self.idle_after = max(history_ttl, 2 * sweep_interval)
        """How long a channel is kept after its last subscriber left (`unsubscribe`)."""
        self._keys = KeyMemory(history_ttl)
        self._sweeping: asyncio.Task[None] | None = None
        self._counter = itertools.count(1)
        self._left: dict[str, float] = {}
        """When the last subscriber of a started channel left, the oldest first."""
        self._ended = EndedEpochs(NAMES_KEPT, SLOTS)
        """Epochs ended per channel, for the latest to end one; names forgotten, per slot."""

    async def start(self) -> None:
        self._sweeping = asyncio.create_task(self._sweep_every())

    async def stop(self) -> None:
        if self._sweeping is not None:
            self._sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeping

    def publish(self, items: Sequence[Item]) -> list[Message]:
        sink = self.sink
        history = self.history
        now = self.clock()
        out = []
        for name, data, key in items:
            seen = None if key is None else self._keys.get(name, key)
            if seen is not None:
                out.append(Message(name, seen.epoch, seen.id, seen.ts, data))
                continue
            kept = history.get(name)
            if kept is None:
                kept = history.load(name, self._unstarted(name), 0)
            epoch = kept.epoch
            if is_unstarted(epoch):  # tagged as the unstarted epoch it begins after
                epoch = f"{self._boot}{next(self._counter):x}{epoch[len(history.unstarted) :]}"
            message = Message(name, epoch, kept.last_id + 1, now, data)
            history.append(message)
            sink.append(message)
            if key is not None:
                self._keys.put(name, key, Published(epoch, message.id, now))
            out.append(message)
        return out

    def subscribe(self, names: Sequence[str], positions: Mapping[str, Position]) -> None:
        history = self.history
        for name in names:
            if name not in history:
                history.load(name, self._unstarted(name), 0)

    def unsubscribe(self, names: Sequence[str]) -> None:
        history, sink = self.history, self.sink
        for name in names:
            kept = history.get(name)
            if kept is None or sink.audience(name):
                continue
            if kept.unstarted:
                del history[name]  # subscribing leaves nothing behind
            else:
                self._left.pop(name, None)
                self._left[name] = time.monotonic()

    async def info(self, name: str) -> ChannelInfo | None:
        return self.history.info(name)

    def _unstarted(self, name: str) -> str:
        return unstarted(self._boot, self._tag(name))

    def _tag(self, name: str) -> str:
        return epoch_tag(*self._ended.counts(name))

    async def _sweep_every(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            await self.sweep()

    async def sweep(self, idle_after: float | None = None) -> int:
        """Drop the channels nobody holds whose history has expired and whose last subscriber
        left `idle_after` (default `self.idle_after`) ago or more, `SWEEP_SLICE` at a time with
        a loop turn between slices. The tables then give back the room of what left them
        (`refit`)."""
        history, sink, left = self.history, self.sink, self._left
        ttl = history.ttl
        idle = self.idle_after if idle_after is None else idle_after
        dropped = 0
        async for names in slices(list(history), SWEEP_SLICE):
            now, idle_before = self.clock(), time.monotonic() - idle
            while left and next(iter(left.values())) <= idle_before:
                del left[next(iter(left))]
            for name in names:
                kept = history.get(name)
                if kept is None or name in left or sink.audience(name):
                    continue
                kept.expire(ttl, now)
                if kept.buffer is None:
                    del history[name]
                    if not kept.unstarted:  # its next unstarted epoch differs from the last
                        self._ended.end(name)
                    dropped += 1
        refit(history)  # also the room of unstarted channels gone with their subscribers
        refit(left)
        return dropped
