"""The histories a broker keeps on this node: per channel its epoch, its last id and its last
messages, each stored once as the envelope head every subscriber is sent.

A channel's buffered heads lie one after the other in one `bytearray`, and beside them, per
message, three numbers in one array (where its head ends, its time, its arrival order): a
message held costs its head's bytes and 24 bytes, with no object of its own (no `Message`, no
`bytes`: a backlog read copies the heads it returns). Ids are not stored: a channel's buffered
messages are the ids just before its last one, in order. A channel with nothing buffered keeps
no containers at all (docs/performance.md, "Memory per channel": the budgets and their
figures).

One buffer per channel, past a few messages larger than the small-object allocator's blocks,
also gives memory back: a swept channel frees its buffer to the C allocator whole, where
`Tally.trim` (after a large sweep) returns the pages to the system, instead of leaving
thousands of small heads scattered through the interpreter's arenas.

An engine writes its histories (`Histories.load`, `append`, `reset`, deleting a channel); the
hub only reads them (`get`, `backlog`, counts). The memory engine's are the whole truth; a
shared engine's are its copy of what it follows.
"""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from mypy_extensions import mypyc_attr

from .errors import InvalidInput
from .messages import Event, Gap, Message
from .positions import Position, born, cursor_part, is_unstarted

COMPACT_AFTER: Final = 8
"""Entries dropped from the front of an index before they are removed for good (see `Buffer`)."""
STRIDE: Final = 3
"""Numbers per entry of `Buffer.index`: where its head ends, its time, its arrival order."""
ENTRY: Final = struct.Struct(f"{STRIDE}d").pack
"""One entry of `Buffer.index` as its bytes: appended in one call, each number converted once
(an `array.extend` converts each through argument parsing, three times the cost)."""
LARGE: Final = 512
"""Heads longer than this are kept as they came (`Buffer.large`), not copied into `heads`: such
a `bytes` is the C allocator's already, and the subscribers its backlog goes to share it."""


class ChannelInfo(NamedTuple):
    """A channel's state as the broker knows it, for GET /channels."""

    epoch: str
    last_id: int
    buffered: int


class Tally:
    """What the histories of one engine hold, kept as they change (`/stats`, `/metrics`)."""

    __slots__ = ("bytes", "messages")

    def __init__(self) -> None:
        self.bytes = 0
        """Bytes of the buffered heads."""
        self.messages = 0


class Buffer:
    """A channel's buffered messages, oldest first: their heads in `heads`, and per message
    `STRIDE` numbers in `index` (where its head ends in bytes counted since the buffer began,
    its time, its arrival order; exact as floats up to 2**53).

    Entries leave from the front (size and age limits): their heads are cut from the front of
    `heads` (a bytearray does that by moving its start, compacting when it grows), and `start`
    moves past their index entries, which are removed for good only once more than half of the
    index (and at least `COMPACT_AFTER` entries) is gone, so a full history of N messages costs
    O(1), not O(N), per message appended.
    """

    __slots__ = ("base", "heads", "index", "large", "start")

    def __init__(self) -> None:
        self.heads = bytearray()
        self.large: dict[int, bytes] | None = None
        """Heads longer than `LARGE`, by message id (their place in `heads` is empty)."""
        self.index: array[float] = array("d")
        self.base = 0
        """Where `heads[0]` lies, in bytes counted since the buffer began."""
        self.start = 0
        """The first entry of `index` still buffered."""

    def __len__(self) -> int:
        return len(self.index) // STRIDE - self.start

    def keep(self, id_: int, head: bytes) -> None:
        """Keep a head longer than `LARGE` as it came (its index entry is the caller's)."""
        large = self.large
        if large is None:
            large = self.large = {}
        large[id_] = head

    def time(self, entry: int) -> float:
        return self.index[entry * STRIDE + 1]

    def head(self, entry: int) -> tuple[int, int]:
        """Where entry `entry`'s head lies in `heads`."""
        index, base = self.index, self.base
        begin = 0 if entry == self.start else int(index[entry * STRIDE - STRIDE]) - base
        return begin, int(index[entry * STRIDE]) - base

    def drop(self, count: int) -> int:
        """Drop the `count` oldest entries; the bytes of their heads."""
        end = self.start + count
        index = self.index
        cut = int(index[end * STRIDE - STRIDE]) - self.base
        del self.heads[:cut]
        self.base += cut
        self.start = end
        if end >= COMPACT_AFTER and 2 * end >= len(index) // STRIDE:
            del index[: end * STRIDE]
            self.start = 0
        return cut

    def older(self, cutoff: float, start: int) -> int:
        """How many entries from `start` on are older than `cutoff` (the newest, the one just
        kept, never is: a buffer keeps at least it)."""
        index = self.index
        end = start
        last = len(index) // STRIDE - 1
        while end < last and index[end * STRIDE + 1] < cutoff:
            end += 1
        return end - start


class ChannelHistory:
    """One channel as a broker holds it: its epoch (and the unstarted epoch it began after,
    `born`), its last id, and its buffered messages (`Buffer`, None when there are none),
    counted in its engine's `Tally`."""

    __slots__ = ("born", "buffer", "epoch", "last_id", "name", "tally")

    def __init__(self, name: str, epoch: str, born: str, last_id: int, tally: Tally) -> None:
        self.name = name
        self.epoch = epoch
        self.born = born
        """The unstarted epoch this epoch began after (`core.positions.born`): a cursor at
        (`born`, 0) was taken before its first message, after any earlier epoch of the channel
        ended, and missed nothing."""
        self.last_id = last_id
        self.buffer: Buffer | None = None
        self.tally = tally

    @property
    def unstarted(self) -> bool:
        """Never published to: dropping it loses nothing, its epoch and ids start the same."""
        return is_unstarted(self.epoch)

    @property
    def buffered(self) -> int:
        """Messages buffered."""
        return 0 if self.buffer is None else len(self.buffer)

    @property
    def first(self) -> int:
        """The oldest buffered id; `last_id + 1` when nothing is buffered."""
        buffer = self.buffer
        if buffer is None:
            return self.last_id + 1
        return self.last_id - len(buffer) + 1

    def add(self, message: Message, size: int, ttl: float) -> None:
        """`message`, the next id (or the first of a new epoch), kept; the oldest beyond `size`
        or older than `ttl` before it dropped.

        Every publish runs this, so the buffer is written here, not through its methods: each
        call cost as much as the step it made (docs/performance.md, "The fan-out rows")."""
        buffer = self.buffer
        if buffer is None:
            buffer = self.buffer = Buffer()
        head, ts = message.head, message.ts
        heads, index = buffer.heads, buffer.index
        if len(head) > LARGE:
            buffer.keep(message.id, head)
        else:
            heads += head
        index.frombytes(ENTRY(buffer.base + len(heads), ts, message.seq))
        tally = self.tally
        self.last_id = message.id
        start = buffer.start
        excess = len(index) // STRIDE - start - size
        cutoff = ts - ttl
        if excess == 1 and not buffer.large and index[start * STRIDE + STRIDE + 1] >= cutoff:
            tally.bytes += len(head) - buffer.drop(1)  # a full history's usual append: one out
            return
        tally.bytes += len(head)
        tally.messages += 1
        if excess > 0 or index[start * STRIDE + 1] < cutoff:  # usually stops here, or drops one
            if excess < 0:
                excess = 0
            if index[(start + excess) * STRIDE + 1] < cutoff:
                excess += buffer.older(cutoff, start + excess)
            self._drop(buffer, excess)

    def _drop(self, buffer: Buffer, count: int) -> None:
        if count:
            tally = self.tally
            large = buffer.large
            if large:
                first = self.first
                for id_ in range(first, first + count):
                    head = large.pop(id_, None)
                    if head is not None:
                        tally.bytes -= len(head)
            tally.bytes -= buffer.drop(count)
            tally.messages -= count

    def expire(self, ttl: float, now: float | None = None) -> None:
        """Drop what is older than the TTL."""
        buffer = self.buffer
        if buffer is not None:
            cutoff = (time.time() if now is None else now) - ttl
            old = buffer.older(cutoff, buffer.start)
            if old == len(buffer) - 1 and buffer.time(len(buffer.index) // STRIDE - 1) < cutoff:
                self.clear()
            elif old:
                self._drop(buffer, old)

    def clear(self) -> None:
        """Drop every buffered message."""
        buffer = self.buffer
        if buffer is not None:
            self.buffer = None
            tally = self.tally
            tally.bytes -= len(buffer.heads)
            if buffer.large:
                tally.bytes -= sum(map(len, buffer.large.values()))
            tally.messages -= len(buffer)

    def messages(self, after: int, upto: int, most: int | None = None) -> list[Message]:
        """The buffered messages with ids in (`after`, `upto`], oldest first, the first `most`
        of them when given (a head up to `LARGE` bytes copied out of the buffer, a longer one
        shared).

        A long-poll catching up reads up to its answer's bound of these per poll, so the loop
        walks the index itself (`Buffer.head` per message was a third of the read)."""
        buffer = self.buffer
        if buffer is None:
            return []
        first = self.first
        low = max(after + 1, first)
        high = min(upto, self.last_id)
        if most is not None:
            high = min(high, low + most - 1)
        if low > high:
            return []
        index, base, large = buffer.index, buffer.base, buffer.large
        name, epoch = self.name, self.epoch
        entry = buffer.start - first + low
        begin = buffer.head(entry)[0]
        at = entry * STRIDE
        out = []
        # released in `finally`, not by `with`: compiled, a `with` looks up and calls
        # `__enter__` and `__exit__` by name (a one-behind re-poll reads one message here)
        heads = memoryview(buffer.heads)
        try:
            for id_ in range(low, high + 1):
                end = int(index[at]) - base
                head = bytes(heads[begin:end]) if end > begin else large[id_]  # type: ignore[index]
                out.append(Message.kept(name, epoch, id_, index[at + 1], int(index[at + 2]), head))
                begin = end  # each head begins where the one before it ended
                at += STRIDE
        finally:
            heads.release()  # a bytearray with a view open cannot grow or shrink
        return out

    def backlog(
        self, position: Position | None, count: int, upto: int, most: int | None = None
    ) -> list[Event]:
        """What a subscriber joining at `position` must get first: a gap, then messages.

        Only messages up to `upto` count (those the hub has fanned out), so one still pending
        reaches the subscriber once, by the fan-out. Without a position: the last `count`.
        With `most`, only the first `most` of those messages are read (a long-poll's answer
        carries no more than its bound, and one past it tells it more is waiting), so a poll
        far behind reads its answer, not the whole history.
        """
        upto = min(upto, self.last_id)
        events: list[Event] = []
        if position is None:
            if count > 0:
                events.extend(self.messages(upto - count, upto, most))
            return events
        epoch, seen = position
        if seen == 0 and epoch == self.born:
            epoch = self.epoch  # joined before the first message of this epoch: nothing missed
        first = min(self.first, upto + 1)
        after_gap = cursor_part(self.name, self.epoch, first - 1)
        if epoch != self.epoch:
            gap = Gap(self.name, 1, first - 1, "epoch", after_gap)
            return [gap, *self.messages(0, upto, most)]
        if seen > self.last_id:
            raise InvalidInput(
                "bad_cursor",
                f"cursor for {self.name!r} is at id {seen}, past the channel's last id "
                f"{self.last_id}",
            )
        if seen < first - 1:
            events.append(Gap(self.name, seen + 1, first - 1, "expired", after_gap))
        events.extend(self.messages(seen, upto, most))
        return events


class Keeping:
    """What each channel of one engine keeps, `size` messages for `ttl` seconds, and the
    arrival order last given (`Message.seq`). Read on every publish, so a native class's
    fields: `Histories`, a subclass of dict, has its own attributes looked up by name (four of
    them, with `next` on a counter, cost a compiled publish 0.7k to 1k instructions)."""

    __slots__ = ("arrived", "size", "ttl")

    def __init__(self, size: int, ttl: float) -> None:
        self.size = size
        self.ttl = ttl
        self.arrived = 0


@mypyc_attr(allow_interpreted_subclasses=True)
class Histories(dict[str, ChannelHistory]):
    """The channels a broker holds on this node, by name: what subscribers resume from.

    `unstarted` is the unstarted epoch of the broker's current generation, untagged
    (`core.positions.unstarted`): every epoch held began in that generation, after the
    unstarted epoch `core.positions.born` names. Each message kept gets the next arrival order
    (`Message.seq`), so backlogs of several channels come in the order messages arrived.
    """

    __slots__ = ("keeping", "tally", "unstarted")

    def __init__(self, size: int, ttl: float, unstarted: str) -> None:
        super().__init__()
        self.keeping = Keeping(size, ttl)
        self.unstarted = unstarted
        self.tally = Tally()
        """The bytes and messages every channel here buffers."""

    @property
    def size(self) -> int:
        """Messages each channel keeps at most."""
        return self.keeping.size

    @property
    def ttl(self) -> float:
        """Seconds each channel keeps a message."""
        return self.keeping.ttl

    def __setitem__(self, name: str, history: ChannelHistory) -> None:
        """dict's own. Stated because compiled, a class that defines `__delitem__` but not this
        stores through `super(type(self), self).__setitem__`, which for a subclass of this one
        comes back here without end (RecursionError)."""
        super().__setitem__(name, history)

    def __delitem__(self, name: str) -> None:
        self.pop(name)

    def pop(self, name: str, *default: ChannelHistory | None) -> ChannelHistory | None:  # type: ignore[override]
        """`name` dropped (its buffered messages no longer counted), or `default`."""
        history = super().pop(name, default[0]) if default else super().pop(name)
        if history is not None:
            history.clear()
        return history

    def load(
        self, name: str, epoch: str, last_id: int, messages: Iterable[Message] = ()
    ) -> ChannelHistory:
        """`name` as read from where the truth is: its epoch, its last id and what it buffers
        (the run of `messages` that ends at `last_id`; any older, unconnected ones are gone)."""
        replaced = self.get(name)
        if replaced is not None:
            replaced.clear()
        history = ChannelHistory(name, epoch, born(self.unstarted, epoch), last_id, self.tally)
        self[name] = history
        self._fill(history, messages)
        return history

    def reset(self, name: str, epoch: str, last_id: int, messages: Iterable[Message]) -> None:
        """`name` moved on without this node (ids lost, or a new epoch): `load` it afresh, in
        place, so whoever reads the same history object sees the move."""
        history = self.get(name)
        if history is None:
            self.load(name, epoch, last_id, messages)
            return
        history.epoch, history.born = epoch, born(self.unstarted, epoch)
        history.last_id = last_id
        history.clear()
        self._fill(history, messages)

    def append(self, message: Message) -> ChannelHistory:
        """Keep `message`, its channel's next (a first message gives the channel its epoch),
        giving it its arrival order; the oldest past the size or the TTL go."""
        name = message.channel
        history = self.get(name)
        if history is None:
            history = self.load(name, message.epoch, message.id - 1)
        elif history.epoch != message.epoch:
            history.epoch, history.born = message.epoch, born(self.unstarted, message.epoch)
        keeping = self.keeping
        keeping.arrived += 1
        message.seq = keeping.arrived
        history.add(message, keeping.size, keeping.ttl)
        return history

    def info(self, name: str) -> ChannelInfo | None:
        """The state of `name`, for GET /channels, or None if it is not held here."""
        history = self.get(name)
        if history is None:
            return None
        history.expire(self.ttl)
        return ChannelInfo(history.epoch, history.last_id, history.buffered)

    def _fill(self, history: ChannelHistory, messages: Iterable[Message]) -> None:
        run = _ending_at(history.last_id, [m for m in messages if m.id <= history.last_id])
        for message in run:
            history.add(message, self.size, self.ttl)
        history.expire(self.ttl)


def _ending_at(last_id: int, messages: Sequence[Message]) -> Sequence[Message]:
    """The longest run of consecutive ids at the end of `messages` whose last id is `last_id`."""
    if not messages or messages[-1].id != last_id:
        return ()
    start = len(messages) - 1
    while start and messages[start - 1].id == messages[start].id - 1:
        start -= 1
    return messages[start:]
