"""The hub: channels held on this server and the fan-out to their local subscribers.

Fan-out is the hot path. Messages dispatched in one loop iteration are flushed together by one
callback; each is framed once per framing and the same bytes are written, synchronously and in
one loop, to every one-channel subscriber of that framing. Long-poll waiters get one shared body.
A subscriber whose unsent bytes pass the limit is cut off and resumes from its cursor.

A flush costs about one `send()` per subscriber whatever it carries, so when the last one was
costly the next waits a little (30 % of that cost in whole milliseconds, at most
`max_flush_delay`) for more messages to share its writes: a publisher that sends one message per
request then gets several into each flush instead of one. After a flush under 3.3 ms (a few
hundred subscribers) the next one does not wait, and the wait counts from the end of the last
flush: a message that arrives after the channel was quiet that long is written at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from ..wire.framing import Framing, longpoll_body
from .broker import Broker, ChannelInfo, Item
from .channel import Channel
from .messages import Event, Message, control
from .positions import Position, born
from .subscription import Bound, LocalChannel, StreamSubscriber, Waiter, bounded

log = logging.getLogger("pushserver.hub")
T = TypeVar("T")

FLUSH_DELAY_SHARE = 0.3
"""The next flush waits at most this share of the last flush's duration."""
SWEEP_SLICE = 1000
"""Channels the idle sweep looks at per loop turn, so a pass over many never holds up delivery."""
HEARTBEAT_SLICE = 500
"""Streams a heartbeat writes to per loop turn. Writing to 20,000 at once held the loop for about
150 ms on the machine in docs/performance.md, and a message published meanwhile waited for it."""


class HubStats:
    """Plain counters read by /stats and the Prometheus collector, free to bump on the hot path."""

    __slots__ = ("delivered", "disconnects", "limits_hit", "messages_in", "started")

    def __init__(self) -> None:
        self.messages_in = 0
        self.delivered: Counter[str] = Counter()
        self.disconnects: Counter[str] = Counter()
        self.limits_hit: Counter[str] = Counter()
        self.started = time.time()


class Answer:
    """One long-poll answer shared by the waiters of a fan-out, and its wrapped form."""

    __slots__ = ("body", "count", "whole", "wrap")

    def __init__(self, body: bytes, count: int) -> None:
        self.body = body
        self.count = count
        self.wrap: Callable[[bytes], bytes] | None = None
        self.whole = b""

    def wrapped(self, wrap: Callable[[bytes], bytes]) -> bytes:
        if wrap is not self.wrap:
            self.wrap, self.whole = wrap, wrap(self.body)
        return self.whole


class Hub:
    """Channels held on this server, their subscribers and the fan-out; owns its broker and is
    the broker's `Sink`."""

    def __init__(
        self,
        broker: Broker,
        history_size: int,
        history_ttl: float,
        max_buffer_bytes: int,
        max_flush_delay: float = 0.0,
        observe_fanout: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        self.broker = broker
        self.history_size = history_size
        self.history_ttl = history_ttl
        self.max_buffer_bytes = max_buffer_bytes
        self.max_flush_delay = max_flush_delay
        self.flush_delay = 0.0
        """How long after the last flush the next one waits for company; from its cost."""
        self.last_flush_end = 0.0
        """Loop time at which the last flush ended; the next one waits at most until
        `last_flush_end + flush_delay`."""
        self.observe_fanout = observe_fanout
        self.channels: dict[str, LocalChannel] = {}
        self.streams: set[StreamSubscriber] = set()
        self.closing: set[object] = set()
        """Connections out of the fan-out that still finish their close (`linger`)."""
        self.waiters: set[Waiter] = set()
        self.stats = HubStats()
        self._dirty: list[LocalChannel] = []
        self._batch: list[Message] = []
        self._seq = itertools.count(1)
        self._loop = asyncio.get_running_loop()
        self._all_gone: asyncio.Future[None] | None = None
        self.awaiting = 0
        """Publishes and opens handed to the broker (`publish`, `open`) it has not answered."""
        self._answered: asyncio.Future[None] | None = None
        broker.bind(self)

    # -- what the web layer asks -------------------------------------------------------------

    async def publish(self, items: Sequence[Item | tuple[str, bytes]]) -> list[tuple[Message, int]]:
        """Publish through the broker; each message with the local audience it reached. A plain
        `(channel, data)` pair is an item without an idempotency key. Counted while the broker
        holds it, so a shutdown closes the broker only once it has answered (`answered`)."""
        self.awaiting += 1
        try:
            return await self.broker.publish([Item(*item) for item in items])
        finally:
            self._back()

    def _back(self) -> None:
        """The broker answered a call `awaiting` counted."""
        self.awaiting -= 1
        answered = self._answered
        if not self.awaiting and answered is not None and not answered.done():
            answered.set_result(None)

    def publish_now(self, items: Sequence[Item]) -> list[tuple[Message, int]] | None:
        """`publish` when the broker needs no wait for it; None (nothing done) otherwise."""
        return self.broker.publish_now(items)

    @property
    def flushing(self) -> bool:
        """Whether a flush is due: an answer written now would go out before its deliveries."""
        return bool(self._dirty)

    async def open(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> list[LocalChannel]:
        """The local channels for a new subscription, current as the broker knows them.

        Does not leave the event loop between returning and the caller attaching its
        subscriber, so no message can slip between the backlog and live delivery. Counted while
        the broker holds it, as a publish is.
        """
        self.awaiting += 1
        try:
            await self.broker.follow(names, positions)
        finally:
            self._back()
        return [self.channels[n] for n in names]

    def open_now(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> list[LocalChannel] | None:
        """`open` when the broker needs no wait for it (the usual re-poll); None otherwise."""
        if not self.broker.follow_now(names, positions):
            return None
        return [self.channels[n] for n in names]

    def current(self, ch: LocalChannel) -> bool:
        """Whether a subscription kept on `ch` may be held again as it is: `ch` is still this
        hub's channel for its name and the broker has it at hand and current (`open_now`
        without the lookups, for a re-poll at the channel's head)."""
        return self.channels.get(ch.name) is ch and self.broker.current(ch.name)

    def release(self, channels: Iterable[LocalChannel]) -> None:
        """A subscription on these channels ended; a channel nobody published to goes with its
        last subscriber, so subscribing leaves no state behind."""
        names = [ch.name for ch in channels]
        self.broker.release(names)
        for name in names:
            ch = self.channels.get(name)
            if ch is not None and ch.unstarted and not self.broker.following(name):
                self.forget(name)

    async def info(self, name: str) -> ChannelInfo | None:
        return await self.broker.info(name)

    # -- the broker's sink -------------------------------------------------------------------

    def state(self, name: str) -> Position | None:
        ch = self.channels.get(name)
        return None if ch is None else Position(ch.epoch, ch.last_id)

    def _hold(self, name: str, epoch: str, last_id: int) -> LocalChannel:
        """A channel held here from now on, in an epoch of the broker's current generation."""
        ch = self.channels[name] = Channel(name, epoch, self.history_size, last_id)
        ch.born = born(self.broker.unstarted, epoch)
        return ch

    def load(self, name: str, epoch: str, last_id: int, messages: Sequence[Message]) -> None:
        ch = self._hold(name, epoch, last_id)
        ch.history.extend(m for m in messages if m.id <= last_id)
        ch.expire(self.history_ttl)

    def append(self, message: Message) -> None:
        ch = self.channels.get(message.channel)
        if ch is None:  # dropped by the idle sweep meanwhile; nobody is held on it
            ch = self._hold(message.channel, message.epoch, message.id - 1)
        if ch.epoch != message.epoch:  # an unstarted channel's first message gives it its epoch
            ch.epoch, ch.born = message.epoch, born(self.broker.unstarted, message.epoch)
        ch.last_id = message.id
        ch.history.append(message)
        ch.expire(self.history_ttl, message.ts)
        ch.idle_since = time.monotonic()
        self.dispatch((message,))

    def jump(self, name: str, epoch: str, last_id: int, messages: Sequence[Message]) -> None:
        ch = self.channels.get(name)
        if ch is None:
            self.load(name, epoch, last_id, messages)
            return
        if ch.pending:
            self._flush()  # what was dispatched before the jump goes out before its gap
        position = Position(ch.epoch, ch.sent_id)
        if epoch != ch.epoch:
            log.debug("channel %r: new epoch %s (history lost)", name, epoch)
        ch.reset(epoch, last_id)
        ch.born = born(self.broker.unstarted, epoch)
        ch.history.extend(m for m in messages if m.id <= last_id)
        ch.expire(self.history_ttl)
        self._announce(ch, ch.backlog(position, 0))

    def audience(self, name: str) -> int:
        ch = self.channels.get(name)
        return 0 if ch is None else ch.subscriber_count

    def snapshot(self, name: str) -> ChannelInfo | None:
        ch = self.channels.get(name)
        if ch is None:
            return None
        ch.expire(self.history_ttl)
        return ChannelInfo(ch.epoch, ch.last_id, len(ch.history))

    def forget(self, name: str) -> None:
        ch = self.channels.get(name)
        if ch is not None and not ch.pending and not ch.subscriber_count:
            del self.channels[name]

    async def sweep(self, idle_after: float) -> int:
        """Drop channels with no subscribers and no history that have been idle a while (at
        once if never published to), `SWEEP_SLICE` at a time with a loop turn between slices.
        The broker hears of each started one: its epoch ended here."""
        dropped = 0
        async for names in _slices(list(self.channels), SWEEP_SLICE):
            now, mono = time.time(), time.monotonic()
            for name in names:
                ch = self.channels.get(name)
                if ch is not None and self._idle(ch, now, mono - idle_after):
                    del self.channels[name]
                    if not ch.unstarted:
                        self.broker.dropped(name)
                    dropped += 1
        return dropped

    def _idle(self, ch: LocalChannel, now: float, idle_before: float) -> bool:
        if ch.pending or ch.subscriber_count or self.broker.following(ch.name):
            return False
        ch.expire(self.history_ttl, now)
        return not ch.history and (ch.unstarted or ch.idle_since <= idle_before)

    # -- publishing and fan-out --------------------------------------------------------------

    def dispatch(self, messages: Iterable[Message]) -> None:
        """Queue messages (in id order per channel) for the next flush: at the end of this loop
        iteration, or up to `flush_delay` after the last flush when that one was costly. A
        message of a channel nobody is held on is fanned out at once: to no one."""
        channels = self.channels
        seq = self._seq
        for m in messages:
            ch = channels.get(m.channel)
            if ch is None:
                continue
            m.seq = next(seq)
            self.stats.messages_in += 1
            if not ch.pending and not ch.held:
                ch.mark_sent(m)  # nobody to write to: no flush to wait for
                continue
            if not ch.pending:
                if not self._dirty:
                    wait = self.last_flush_end + self.flush_delay - self._loop.time()
                    if wait > 0:
                        self._loop.call_later(wait, self._flush)
                    else:
                        self._loop.call_soon(self._flush)
                self._dirty.append(ch)
            ch.pending.append(m)
            self._batch.append(m)

    def _flush(self) -> None:
        started = time.perf_counter()
        dirty, self._dirty = self._dirty, []
        batch, self._batch = self._batch, []
        cut: list[StreamSubscriber] = []
        multi = False
        for ch in dirty:
            messages, ch.pending = ch.pending, []
            self.fan_out(ch, messages, cut)
            multi = multi or bool(ch.multi)
        if multi:
            self._fan_out_multi(batch, cut)
        self.cut_off(cut)
        delay = min(self.max_flush_delay, (time.perf_counter() - started) * FLUSH_DELAY_SHARE)
        # Loop timers count whole milliseconds; rounding down keeps the wait within its share.
        self.flush_delay = math.floor(delay * 1000) / 1000
        self.last_flush_end = self._loop.time()

    def fan_out(
        self, ch: LocalChannel, messages: list[Message], cut: list[StreamSubscriber]
    ) -> None:
        """One-channel subscribers of `ch`: the same bytes for every subscriber of a framing."""
        ch.mark_sent(messages[-1])
        delivered = self.stats.delivered
        cursors = [m.position.encode() for m in messages]
        singles = [m.body(c) for m, c in zip(messages, cursors, strict=True)]
        limit = self.max_buffer_bytes
        for framing, subs in ch.streams.items():
            if not subs:
                continue
            frame = framing.chunk(
                b"".join(framing.event(b, c) for b, c in zip(singles, cursors, strict=True))
            )
            for sub in subs:
                transport = sub.transport
                try:
                    transport.write(frame)
                    if transport.get_write_buffer_size() > limit:
                        cut.append(sub)
                except RuntimeError:  # closed under us; unregistered when the loss is reported
                    cut.append(sub)
            delivered[framing.name] += len(subs) * len(messages)
        if ch.waiters:
            self._answer_waiters(ch, singles, cursors)
        self.observe_fanout(time.time() - messages[0].ts)

    def _answer_waiters(self, ch: LocalChannel, singles: list[bytes], cursors: list[bytes]) -> None:
        """One-channel long-polls of `ch`: one answer per distinct bound, built on first use,
        so every waiter whose bound holds the batch shares one body (and one wrapped answer)."""
        answers: dict[Bound, Answer] = {}
        delivered = 0
        for waiter in ch.waiters:
            answer = answers.get(waiter.bound)
            if answer is None:
                bodies, last, more = bounded(
                    zip(itertools.repeat(False), singles, cursors), waiter.bound
                )
                body = longpoll_body(bodies, last.decode(), more)
                answer = answers[waiter.bound] = Answer(body, len(bodies))
            delivered += answer.count
            wrap = waiter.wrap
            if wrap is None:
                waiter.resolve(answer.body)
            else:
                waiter.send(answer.wrapped(wrap))
        self.stats.delivered["longpoll"] += delivered
        self.waiters.difference_update(ch.waiters)
        ch.waiters.clear()

    def _fan_out_multi(self, batch: list[Message], cut: list[StreamSubscriber]) -> None:
        """Multi-channel subscribers: shared envelope heads, a cursor of their own, and the
        messages of all their channels in the order they were published."""
        channels = self.channels
        todo: dict[StreamSubscriber | Waiter, list[Message]] = {}
        for m in batch:
            ch = channels.get(m.channel)
            if ch is not None:
                for sub in ch.multi:
                    todo.setdefault(sub, []).append(m)
        delivered = self.stats.delivered
        for sub, messages in todo.items():
            if isinstance(sub, Waiter):
                body, count = sub.answer(messages)
                sub.resolve(body)
                self.remove_waiter(sub)
                delivered["longpoll"] += count
                continue
            self.write(sub, messages, cut)
            delivered[sub.framing.name] += len(messages)

    def write(
        self, sub: StreamSubscriber, events: Sequence[Event], cut: list[StreamSubscriber]
    ) -> None:
        """Events framed for one held stream (its own cursor); added to `cut` if it falls behind.

        The one-channel fan-out keeps its own copy of this inline: it is the hot loop.
        """
        try:
            sub.transport.write(sub.framing.chunk(sub.encode(sub.framing, events)))
            if sub.transport.get_write_buffer_size() > self.max_buffer_bytes:
                cut.append(sub)
        except RuntimeError:  # closed under us; unregistered when the loss is reported
            cut.append(sub)

    def _announce(self, ch: LocalChannel, events: list[Event]) -> None:
        """Events outside the ordinary fan-out (a jump's gap), to everyone held on `ch`."""
        if not events:
            return
        cut: list[StreamSubscriber] = []
        held: list[StreamSubscriber | Waiter] = [s for subs in ch.streams.values() for s in subs]
        held += ch.multi
        held += ch.waiters
        for sub in held:
            if isinstance(sub, Waiter):
                sub.resolve(sub.answer(events)[0])
                self.remove_waiter(sub)
            else:
                self.write(sub, events, cut)
        self.cut_off(cut)

    def cut_off(self, cut: list[StreamSubscriber]) -> None:
        """Drop subscribers that fell too far behind; they resume from their cursor."""
        if cut:
            self.stats.limits_hit["max_buffer_bytes"] += len(cut)
        for sub in cut:
            self.detach(sub)
            sub.transport.abort()
            sub.close("slow")

    # -- subscribers -------------------------------------------------------------------------

    def backlog(
        self, channels: list[LocalChannel], positions: Mapping[str, Position], history: int
    ) -> tuple[list[Event], dict[str, str]]:
        """Events a new subscription gets first, and its starting position per channel.

        A cursor from another node may be past what this one has flushed yet: the pending
        messages go out first, so the fan-out cannot hand the new subscriber what it has had.
        """
        for ch in channels:
            if ch.pending and _ahead(ch, positions.get(ch.name)):
                self._flush()
                break
        events: list[Event] = []
        parts: dict[str, str] = {}
        for ch in channels:
            position = positions.get(ch.name)
            mine = ch.backlog(position, history)
            if position is not None:
                parts[ch.name] = position.part(ch.name)
            elif mine:
                first = mine[0]
                assert isinstance(first, Message), "a backlog without a cursor has no gap"
                parts[ch.name] = Position(ch.epoch, first.id - 1).part(ch.name)
            else:
                parts[ch.name] = ch.sent_position
            events.extend(mine)
        if len(channels) > 1:
            events.sort(key=lambda e: e.seq)
        return events, parts

    def attach(self, sub: StreamSubscriber) -> None:
        if sub.single is not None:
            sub.single.streams.setdefault(sub.framing, set()).add(sub)
        else:
            for ch in sub.channels:
                ch.multi.add(sub)
        self.streams.add(sub)

    def detach(self, sub: StreamSubscriber) -> None:
        """Unregister a stream; safe to call twice."""
        if sub not in self.streams:
            return
        self.streams.discard(sub)
        if sub.single is not None:
            group = sub.single.streams.get(sub.framing)
            if group is not None:
                group.discard(sub)
        for ch in sub.channels:
            ch.multi.discard(sub)
            self._touch(ch)
        if self._all_gone is not None:
            self._check_gone()

    def add_waiter(self, waiter: Waiter) -> None:
        if waiter.single is not None:
            waiter.single.waiters.add(waiter)
        else:
            for ch in waiter.channels:
                ch.multi.add(waiter)
        self.waiters.add(waiter)

    def remove_waiter(self, waiter: Waiter) -> None:
        """Unregister a long-poll (answered, timed out or gone); safe to call twice. A poll the
        fan-out answered is out of every set already (and its channel was touched by the
        message): only a shutdown waiting for it is told."""
        if waiter in self.waiters:
            self.waiters.remove(waiter)
            if waiter.single is not None:
                waiter.single.waiters.discard(waiter)
            for ch in waiter.channels:
                ch.multi.discard(waiter)
                self._touch(ch)
        if self._all_gone is not None:
            self._check_gone()

    @staticmethod
    def _touch(ch: LocalChannel) -> None:
        ch.idle_since = time.monotonic()

    # -- keepalive and shutdown --------------------------------------------------------------

    async def heartbeat(self) -> None:
        """One heartbeat on every held stream, `HEARTBEAT_SLICE` at a time with a loop turn
        between slices, so a message published meanwhile is not held up behind them all."""
        frames: dict[Framing, bytes] = {}
        streams = self.streams
        async for subs in _slices(list(streams), HEARTBEAT_SLICE):
            for sub in subs:
                if sub not in streams:
                    continue  # gone during an earlier slice
                frame = frames.get(sub.framing)
                if frame is None:
                    frame = frames[sub.framing] = sub.framing.chunk(sub.framing.comment(b""))
                with contextlib.suppress(RuntimeError):
                    sub.transport.write(frame)

    def drain(self) -> None:
        """Shutdown: answer every long-poll with its cursor, tell every stream to reconnect."""
        for waiter in list(self.waiters):
            waiter.resolve(longpoll_body([], waiter.cursor))
        for sub in list(self.streams):
            body = control({"type": "reconnect", "cursor": sub.cursor})
            with contextlib.suppress(Exception):
                sub.transport.write(sub.framing.chunk(sub.framing.event(body, None)))
            sub.close("shutdown")

    async def answered(self) -> None:
        """Shutdown: wait until the broker has answered every publish and open handed to it.
        Closing it sooner would fail a publish Redis is running as `504 outcome_unknown` (its
        client would retry one that was published), and leave a subscribe still opening with
        no answer."""
        if self.awaiting:
            self._answered = self._loop.create_future()
            await self._answered

    def linger(self, conn: object) -> None:
        """`conn` has left the fan-out but is still finishing its close (a WebSocket's closing
        handshake, bounded by its transport): a shutdown waits for it too (`closed`)."""
        self.closing.add(conn)

    def closed(self, conn: object) -> None:
        self.closing.discard(conn)
        if self._all_gone is not None:
            self._check_gone()

    async def all_gone(self) -> None:
        """Shutdown: wait until every held stream and long-poll has been unregistered, and every
        connection that lingers to close has closed."""
        if self.streams or self.waiters or self.closing:
            self._all_gone = self._loop.create_future()
            await self._all_gone

    def _check_gone(self) -> None:
        assert self._all_gone is not None
        gone = not self.streams and not self.waiters and not self.closing
        if gone and not self._all_gone.done():
            self._all_gone.set_result(None)


async def _slices(items: list[T], size: int) -> AsyncIterator[list[T]]:
    """`items`, `size` at a time, with a loop turn between: what else is due runs in it."""
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        yield items[start : start + size]


def _ahead(ch: LocalChannel, position: Position | None) -> bool:
    """Whether `position` is past what `ch` has fanned out (by messages still pending, which
    the caller has checked `ch` has)."""
    return position is not None and position.epoch == ch.epoch and position.id > ch.sent_id
