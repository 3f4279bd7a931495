"""The hub: the channels held on this server, who is held on them, and the broker behind them.

The web layer opens subscriptions here (`open`, `open_now`, `current`, `backlog`), registers
what it holds (`attach`, `add_waiter`) and publishes (`publish`, `publish_now`). The hub owns
its broker and is the broker's `Sink`: what the broker reports goes out through the fan-out
(`fanout.Fanout`, the hot path); a graceful shutdown goes through `shutdown.Shutdown`.

What subscribers resume from is the broker's (`Broker.history`); a channel here
(`channel.Channel`) is who is held on it and how far the fan-out has gone, so a channel that
is published to but has no subscriber on this server costs the hub nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from mypy_extensions import mypyc_attr

from .ages import FANOUT_AGE_BOUNDS, Ages
from .broker import Broker, ChannelInfo, Item, new_item
from .channel import Channel
from .fanout import Fanout
from .history import ChannelHistory
from .messages import Event, Message
from .positions import Cursor, Position
from .refit import refit
from .shutdown import Shutdown
from .slices import slices
from .subscription import LocalChannel, StreamSubscriber, Waiter

log = logging.getLogger("pushserver.hub")
T = TypeVar("T")

SWEEP_SLICE: Final = 1000
"""Channels the idle sweep looks at per loop turn, so a pass over many never holds up delivery."""
NO_POSITIONS: Final[Mapping[str, Position]] = {}
"""The positions of a subscription held again at its channel's head. Never written to."""


class HubStats:
    """Plain counters read by /stats and the Prometheus collector, free to bump on the hot path."""

    __slots__ = ("delivered", "disconnects", "fanout_ages", "limits_hit", "messages_in", "started")

    def __init__(self) -> None:
        self.messages_in = 0
        self.fanout_ages = Ages(FANOUT_AGE_BOUNDS)
        """Each one-channel fan-out's age (its first message's publish to its writes)."""
        self.delivered: Counter[str] = Counter()
        self.disconnects: Counter[str] = Counter()
        self.limits_hit: Counter[str] = Counter()
        self.started = time.time()


@mypyc_attr(allow_interpreted_subclasses=True)
class Hub:
    """Channels held on this server and their subscribers; owns its broker and is the broker's
    `Sink`. Compiled too, a subclass may stand in for it, to observe what is asked of it."""

    def __init__(
        self,
        broker: Broker,
        max_buffer_bytes: int,
        max_flush_delay: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock`: the wall clock the broker stamps messages with, which fan-out ages are
        measured on (`Fanout.clock`)."""
        self.broker = broker
        self.channels: dict[str, LocalChannel] = {}
        self.streams: dict[StreamSubscriber, None] = {}
        self.waiters: dict[Waiter, None] = {}
        self.stats = HubStats()
        self.fanout = Fanout(self, max_buffer_bytes, max_flush_delay, clock)
        self.shutdown = Shutdown(self)

    # -- what the web layer asks -------------------------------------------------------------

    async def publish(self, items: Sequence[Item | tuple[str, bytes]]) -> list[tuple[Message, int]]:
        """Publish through the broker; each message with the local audience it reached. A plain
        `(channel, data)` pair is an item without an idempotency key. Counted while the broker
        holds it, so a shutdown closes the broker only once it has answered (`answered`)."""
        out = self.broker.publish(
            [item if len(item) == 3 else new_item((*item, None)) for item in items]
        )
        if isinstance(out, list):
            published = [(m, self.audience(m.channel)) for m in out]
            # One yield lets the flush write to subscribers before the publisher's answer is
            # built and sent, which takes that answer off every delivery's latency.
            await asyncio.sleep(0)
            return published
        return [(m, self.audience(m.channel)) for m in await self._wait(out)]

    def publish_now(self, items: Sequence[Item]) -> list[tuple[Message, int]] | None:
        """`publish` when the broker needs no wait for it (the front end then answers without
        a task); None, having published nothing, when the caller must await `publish`. A twin
        kept for its measured cost: a publish answered in the call that read it took the
        Python per publish from about 151 to 79 µs (docs/performance.md, "A publish without
        a task")."""
        out = self.broker.publish(items)
        if isinstance(out, list):
            return [(m, self.audience(m.channel)) for m in out]
        out.close()  # not started: `publish` asks again
        return None

    async def _wait(self, call: Coroutine[Any, Any, T]) -> T:
        """Await the broker, counted so that a shutdown closes it only once it has answered."""
        self.shutdown.awaiting += 1
        try:
            return await call
        finally:
            self.shutdown.back()

    @property
    def flushing(self) -> bool:
        """Whether a flush is due: an answer written now would go out before its deliveries."""
        return bool(self.fanout.dirty)

    def after_flush(self, callback: Callable[..., object], args: tuple[object, ...] = ()) -> bool:
        """`callback(*args)` at the end of the flush that is due or running, in its callback
        (`Fanout.after_flush`); False, keeping nothing, when none is."""
        return self.fanout.after_flush(callback, args)

    async def open(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> tuple[LocalChannel, ...]:
        """The local channels for a new subscription, current as the broker knows them.

        Does not leave the event loop between returning and the caller attaching its
        subscriber, so no message can slip between the backlog and live delivery.
        """
        waiting = self.broker.subscribe(names, positions)
        if waiting is not None:
            await self._wait(waiting)
        return self._held(names)

    def open_now(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> tuple[LocalChannel, ...] | None:
        """`open` when the broker needs no wait for it (the usual re-poll); None otherwise. A
        twin kept for its measured cost: a re-poll served without a task took server CPU per
        long-poll delivery from 58-64 to 35-36 µs (docs/performance.md, "Re-polls without a
        task or a second parse")."""
        waiting = self.broker.subscribe(names, positions)
        if waiting is not None:
            waiting.close()  # not started: `open` asks again
            return None
        return self._held(names)

    def current(self, ch: LocalChannel, positions: Mapping[str, Position] = NO_POSITIONS) -> bool:
        """Whether a subscription kept on `ch` may be held again as it is: `ch` is still this
        hub's channel for its name, on the broker's current history of it, and the broker has
        it at hand and current (`open_now` without the lookups, for a re-poll at the head),
        caught up with `positions` too (a cursor another node gave may be ahead of this one)."""
        name = ch.name
        if self.channels.get(name) is not ch:
            return False
        waiting = self.broker.subscribe((name,), positions)
        if waiting is not None:
            waiting.close()
            return False
        return self.broker.history.get(name) is ch.history

    def _held(self, names: Sequence[str]) -> tuple[LocalChannel, ...]:
        """This hub's channel for each name (made when new), on the broker's current history."""
        history = self.broker.history
        channels = self.channels
        held = []
        for name in names:
            kept = history[name]
            ch = channels.get(name)
            if ch is None:
                ch = channels[name] = Channel(kept)
            elif ch.history is not kept:
                self._follow(ch, kept)
            held.append(ch)
        return tuple(held)  # kept by the subscriber: 40 bytes less than the list

    def release(self, channels: Iterable[LocalChannel]) -> None:
        """A subscription on these channels ended; a channel nobody published to goes with its
        last subscriber, so subscribing leaves no state behind."""
        names = []
        for ch in channels:
            name = ch.name
            names.append(name)
            if ch.unstarted and not ch.pending and not ch.held and self.channels.get(name) is ch:
                del self.channels[name]
        self.broker.unsubscribe(names)

    async def info(self, name: str) -> ChannelInfo | None:
        return await self.broker.info(name)

    def backlog(
        self,
        channels: tuple[LocalChannel, ...],
        positions: Mapping[str, Position],
        history: int,
        most: int | None = None,
    ) -> tuple[list[Event], Cursor]:
        """Events a new subscription gets first (at most `most` messages per channel, when
        given: `ChannelHistory.backlog`), and its starting cursor.

        A cursor from another node may be past what this one has flushed yet: the pending
        messages go out first, so the fan-out cannot hand the new subscriber what it has had.
        """
        for ch in channels:
            if ch.pending and _ahead(ch, positions.get(ch.name)):
                self.fanout.flush()
                break
        events: list[Event] = []
        at = Cursor()
        for ch in channels:
            name = ch.name
            position = positions.get(name)
            mine = ch.backlog(position, history, most)
            if position is not None:
                at[name] = position.part(name)
            elif mine:
                first = mine[0]
                assert isinstance(first, Message), "a backlog without a cursor has no gap"
                at[name] = Position(ch.epoch, first.id - 1).part(name)
            else:
                at[name] = ch.sent_position
            events.extend(mine)
        if len(channels) > 1:
            events.sort(key=lambda e: e.seq)
        return events, at

    async def sweep(self, idle_after: float) -> int:
        """Forget channels nobody is held on: at once when nobody published to them or the
        broker no longer holds the history they went on from, else once idle `idle_after`;
        `SWEEP_SLICE` at a time with a loop turn between slices. The table then gives back
        the room of what left it (`refit`)."""
        dropped = 0
        channels = self.channels
        history = self.broker.history
        async for names in slices(list(channels), SWEEP_SLICE):
            idle_before = time.monotonic() - idle_after
            for name in names:
                ch = channels.get(name)
                if ch is None or ch.pending or ch.held:
                    continue
                if (
                    ch.unstarted
                    or ch.idle_since <= idle_before
                    or history.get(name) is not ch.history
                ):
                    del channels[name]
                    dropped += 1
        refit(channels)  # also the room of channels gone with their last subscriber
        return dropped

    # -- the broker's sink -------------------------------------------------------------------

    def append(self, message: Message) -> None:
        self.stats.messages_in += 1
        ch = self.channels.get(message.channel)
        if ch is None:
            return  # nobody is held on it here
        if ch.epoch != message.epoch:  # an unstarted channel's first message gives it its epoch
            ch.epoch = message.epoch
        ch.idle_since = time.monotonic()
        self.fanout.queue(ch, message)

    def jump(self, name: str) -> None:
        ch = self.channels.get(name)
        kept = self.broker.history.get(name)
        if ch is not None and kept is not None:
            self._follow(ch, kept)

    def audience(self, name: str) -> int:
        ch = self.channels.get(name)
        return 0 if ch is None else ch.subscriber_count

    def _follow(self, ch: LocalChannel, kept: ChannelHistory) -> None:
        """`ch` goes on from the broker's history `kept` as it is now (it moved on without this
        node, or it replaced the one `ch` went on from): whoever is held on `ch` gets what it
        missed, a gap first, after what was queued before."""
        if ch.pending:
            self.fanout.flush()
        position = Position(ch.epoch, ch.sent_id)
        if kept.epoch != ch.epoch:
            log.debug("channel %r: new epoch %s (history lost)", ch.name, kept.epoch)
        ch.follow(kept)
        if ch.held:
            self.fanout.announce(ch, ch.backlog(position, 0))

    # -- subscribers -------------------------------------------------------------------------

    def attach(self, sub: StreamSubscriber) -> None:
        if sub.single is not None:
            sub.single.streams.setdefault(sub.framing, {})[sub] = None
        else:
            for ch in sub.channels:
                ch.multi[sub] = None
        self.streams[sub] = None

    def detach(self, sub: StreamSubscriber) -> None:
        """Unregister a stream; safe to call twice."""
        if sub not in self.streams:
            return
        del self.streams[sub]
        if sub.single is not None:
            group = sub.single.streams.get(sub.framing)
            if group is not None:
                group.pop(sub, None)
        now = time.monotonic()
        for ch in sub.channels:
            ch.multi.pop(sub, None)
            ch.idle_since = now
        if self.shutdown.gone is not None:
            self.shutdown.check()

    def add_waiter(self, waiter: Waiter) -> None:
        if waiter.single is not None:
            waiter.single.waiters[waiter] = None
        else:
            for ch in waiter.channels:
                ch.multi[waiter] = None
        self.waiters[waiter] = None

    def remove_waiter(self, waiter: Waiter) -> None:
        """Unregister a long-poll (answered, timed out or gone); safe to call twice. A poll the
        fan-out answered is out of every table already (and its channel was touched by the
        message): only a shutdown waiting for it is told."""
        if waiter in self.waiters:
            del self.waiters[waiter]
            if waiter.single is not None:
                waiter.single.waiters.pop(waiter, None)
            now = time.monotonic()
            for ch in waiter.channels:
                ch.multi.pop(waiter, None)
                ch.idle_since = now
        if self.shutdown.gone is not None:
            self.shutdown.check()


def _ahead(ch: LocalChannel, position: Position | None) -> bool:
    """Whether `position` is past what `ch` has fanned out (by messages still pending, which
    the caller has checked `ch` has)."""
    return position is not None and position.epoch == ch.epoch and position.id > ch.sent_id
