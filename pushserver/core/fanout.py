"""The fan-out: messages written to the subscribers held on their channels. The hot path.

Messages queued in one loop iteration are flushed together by one callback; each is framed once
per framing and the same bytes are written, synchronously and in one loop, to every one-channel
subscriber of that framing: no task, no await, no per-subscriber JSON. Long-poll waiters get one
shared body. A subscriber whose unsent bytes pass the limit is cut off and resumes from its
cursor.

A flush costs about one `send()` per subscriber whatever it carries, so when the last one was
costly the next waits a little (30 % of that cost in whole milliseconds, at most
`max_flush_delay`) for more messages to share its writes: a publisher that sends one message per
request then gets several into each flush instead of one. After a flush under 3.3 ms (a few
hundred subscribers) the next one does not wait, and the wait counts from the end of the last
flush: a message that arrives after the channel was quiet that long is written at once.

What must follow a flush's writes (a publisher's 201, the long-polls it answered being done with)
runs at its end, in its own loop callback (`after_flush`): no handle and no loop turn of its own.
A loop callback scheduled from inside the flush would run one turn later, after an `epoll_wait`
of its own (docs/performance.md, "The publish path in system calls").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from ..wire.compression import Chain
from ..wire.framing import Framing, longpoll_body
from .messages import Event, Message, frame_events
from .slices import slices
from .subscription import Bound, LocalChannel, StreamSubscriber, Waiter, bounded

if TYPE_CHECKING:
    from .hub import Hub

log = logging.getLogger("pushserver.hub")
FLUSH_DELAY_SHARE: Final = 0.3
"""The next flush waits at most this share of the last flush's duration."""
HEARTBEAT_SLICE: Final = 500
"""Streams a heartbeat writes to per loop turn. Writing to 20,000 at once held the loop for about
150 ms on the machine in docs/performance.md, and a message published meanwhile waited for it."""


class Answer:
    """One long-poll answer shared by the waiters of a fan-out, and its wrapped forms (one per
    kind of waiter: plain, gzip), each built once."""

    __slots__ = ("body", "count", "wholes")

    def __init__(self, body: bytes, count: int) -> None:
        self.body = body
        self.count = count
        self.wholes: dict[Callable[[bytes], bytes], bytes] = {}

    def wrapped(self, wrap: Callable[[bytes], bytes]) -> bytes:
        whole = self.wholes.get(wrap)
        if whole is None:
            whole = self.wholes[wrap] = wrap(self.body)
        return whole


class Fanout:
    """Writes what the hub's channels receive to who is held on them, in flushes."""

    def __init__(
        self,
        hub: Hub,
        max_buffer_bytes: int,
        max_flush_delay: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.hub = hub
        self.stats = hub.stats
        self.ages = hub.stats.fanout_ages
        self.max_buffer_bytes = max_buffer_bytes
        self.max_flush_delay = max_flush_delay
        self.clock = clock
        """The wall clock messages are stamped with (`Message.ts`, the broker's): a fan-out's
        age is its reading less the first message's stamp."""
        self.flush_delay = 0.0
        """How long after the last flush the next one waits for company; from its cost."""
        self.last_flush_end = 0.0
        """Loop time at which the last flush ended; the next one waits at most until
        `last_flush_end + flush_delay`."""
        self.dirty: list[LocalChannel] = []
        self._batch: list[Message] = []
        self._loop = asyncio.get_running_loop()
        self._running = False
        self._delayed = False
        """The flush due was put off for company (`flush_delay`): nothing waits for it."""
        self._then: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        """What waits for the flush due or running to end (`after_flush`)."""

    def after_flush(self, callback: Callable[..., object], args: tuple[object, ...] = ()) -> bool:
        """`callback(*args)` once the flush running, or due this loop turn, has written
        everything; False, keeping nothing, when none is. A flush put off for company is not
        waited for: a publisher's 201 held until it ran would let one message into each flush.
        `args` as one tuple, not `*args`: compiled, a call with a star goes through a lookup by
        name and a call by value (1.6k instructions of every publish, due or not)."""
        if not (self._running or (self.dirty and not self._delayed)):
            return False
        self._then.append((callback, args))
        return True

    def queue(self, ch: LocalChannel, m: Message) -> None:
        """Queue a message (in id order per channel) for the next flush: at the end of this
        loop iteration, or up to `flush_delay` after the last flush when that one was costly.
        A message of a channel nobody is held on is fanned out at once: to no one."""
        if not ch.pending:
            if not ch.held:
                ch.mark_sent(m)  # nobody to write to: no flush to wait for
                return
            if not self.dirty:
                wait = self.last_flush_end + self.flush_delay - self._loop.time()
                self._delayed = wait > 0
                if self._delayed:
                    self._loop.call_later(wait, self.flush)
                else:
                    self._loop.call_soon(self.flush)
            self.dirty.append(ch)
        ch.pending.append(m)
        self._batch.append(m)

    def flush(self) -> None:
        """Write everything queued (also called early, when what follows must come after it)."""
        started = time.perf_counter()
        dirty, self.dirty = self.dirty, []
        batch, self._batch = self._batch, []
        cut: list[StreamSubscriber] = []
        multi = False
        self._running = True
        try:
            for ch in dirty:
                messages, ch.pending = ch.pending, []
                self.fan_out(ch, messages, cut)
                multi = multi or bool(ch.multi)
            if multi:
                self._fan_out_multi(batch, cut)
            self.cut_off(cut)
        finally:
            self._running = False
        delay = min(self.max_flush_delay, (time.perf_counter() - started) * FLUSH_DELAY_SHARE)
        # Loop timers count whole milliseconds; rounding down keeps the wait within its share.
        self.flush_delay = math.floor(delay * 1000) / 1000
        self.last_flush_end = self._loop.time()
        then, self._then = self._then, []
        for callback, args in then:
            try:
                callback(*args)
            except Exception:  # one's failure is not the others'
                log.exception("after a flush")

    def fan_out(
        self, ch: LocalChannel, messages: list[Message], cut: list[StreamSubscriber]
    ) -> None:
        """One-channel subscribers of `ch`: the same bytes for every subscriber of a framing
        (of a compressed framing: the same bytes for every one that got the frame before)."""
        ch.mark_sent(messages[-1])
        delivered = self.stats.delivered
        cursors = [m.position.encode() for m in messages]
        # indexed: compiled, `map` or `zip(strict=)` is a builtin called by name (1k and 1.7k)
        singles = [messages[i].body(cursors[i]) for i in range(len(messages))]
        limit = self.max_buffer_bytes
        for framing, subs in ch.streams.items():
            if not subs:
                continue
            events = frame_events(framing, messages, singles, cursors)
            delivered[framing.name] += len(subs) * len(messages)
            if framing.coding is not None:
                self._fan_out_deflated(ch, framing, events, subs, cut)
                continue
            frame = framing.chunk(b"".join(events))
            for sub in subs:
                transport = sub.transport
                try:
                    transport.write(frame)
                    if transport.get_write_buffer_size() > limit:
                        cut.append(sub)
                except RuntimeError:  # closed under us; unregistered when the loss is reported
                    cut.append(sub)
        if ch.waiters:
            self._answer_waiters(ch, singles, cursors)
        age, ages = self.clock() - messages[0].ts, self.ages
        ages.counts[bisect_left(ages.bounds, age)] += 1
        ages.total += age

    def _fan_out_deflated(
        self,
        ch: LocalChannel,
        framing: Framing,
        events: list[bytes],
        subs: dict[StreamSubscriber, None],
        cut: list[StreamSubscriber],
    ) -> None:
        """The compressed subscribers of a framing: each piece deflated once per form, made
        before the loop for those that got the piece before it (nearly all), and each
        subscriber's form picked by its `coder`."""
        assert framing.coding is not None
        chain = ch.chains.get(framing)
        if chain is None:
            chain = ch.chains[framing] = Chain(framing.coding)
        pieces = [chain.add(unit) for unit in framing.units(events)]
        for piece in pieces:
            piece.after(0)
        one = pieces[0] if len(pieces) == 1 else None
        limit = self.max_buffer_bytes
        for sub in subs:
            transport = sub.transport
            coder = sub.coder
            assert coder is not None
            try:
                transport.write(
                    coder.take(one) if one is not None else b"".join(map(coder.take, pieces))
                )
                if transport.get_write_buffer_size() > limit:
                    cut.append(sub)
            except RuntimeError:  # closed under us; unregistered when the loss is reported
                cut.append(sub)

    def _answer_waiters(self, ch: LocalChannel, singles: list[bytes], cursors: list[bytes]) -> None:
        """One-channel long-polls of `ch`: one answer per distinct bound, built on first use,
        so every waiter whose bound holds the batch shares one body (and one wrapped answer)."""
        answers: dict[Bound, Answer] = {}
        delivered = 0
        held = self.hub.waiters
        items = [(False, singles[i], cursors[i]) for i in range(len(singles))]
        for waiter in ch.waiters:
            answer = answers.get(waiter.bound)
            if answer is None:
                bodies, last, more = bounded(items, waiter.bound)
                body = longpoll_body(bodies, last.decode(), more)
                answer = answers[waiter.bound] = Answer(body, len(bodies))
            delivered += answer.count
            held.pop(waiter, None)
            wrap = waiter.wrapper()
            if wrap is None:
                waiter.resolve(answer.body)
            else:
                waiter.send(answer.wrapped(wrap))
        self.stats.delivered["longpoll"] += delivered
        ch.waiters.clear()

    def _fan_out_multi(self, batch: list[Message], cut: list[StreamSubscriber]) -> None:
        """Multi-channel subscribers: shared envelope heads, a cursor of their own, and the
        messages of all their channels in the order they were published."""
        channels = self.hub.channels
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
                self.hub.remove_waiter(sub)
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
            sub.transport.write(sub.wire(sub.frames(sub.framing, events)))
            if sub.transport.get_write_buffer_size() > self.max_buffer_bytes:
                cut.append(sub)
        except RuntimeError:  # closed under us; unregistered when the loss is reported
            cut.append(sub)

    def announce(self, ch: LocalChannel, events: list[Event]) -> None:
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
                self.hub.remove_waiter(sub)
            else:
                self.write(sub, events, cut)
        self.cut_off(cut)

    def cut_off(self, cut: list[StreamSubscriber]) -> None:
        """Drop subscribers that fell too far behind; they resume from their cursor."""
        if cut:
            self.stats.limits_hit["max_buffer_bytes"] += len(cut)
        for sub in cut:
            self.hub.detach(sub)
            sub.transport.abort()
            sub.close("slow")

    async def heartbeat(self) -> None:
        """One heartbeat on every held stream, `HEARTBEAT_SLICE` at a time with a loop turn
        between slices, so a message published meanwhile is not held up behind them all."""
        frames: dict[Framing, bytes] = {}
        streams = self.hub.streams
        async for subs in slices(list(streams), HEARTBEAT_SLICE):
            for sub in subs:
                if sub not in streams:
                    continue  # gone during an earlier slice
                frame = frames.get(sub.framing) if sub.coder is None else None
                if frame is None:  # made once per framing, or by a compressed stream's chain
                    frame = sub.heartbeat()
                    if sub.coder is None:
                        frames[sub.framing] = frame
                with contextlib.suppress(RuntimeError):
                    sub.transport.write(frame)
