"""In-order apply and gap repair for a broker shared by several nodes, whatever its backend.

Notifications can arrive out of order, twice, or not at all (lost while reconnecting), and reads
of the history can cross them. A `Sequencer` per channel hands the sink each message exactly
once, in id order, after putting it in the engine's histories: a message that skips ids is
queued and asks for a read of the history; a read that shows the history moved on without this
node (ids no longer buffered, or a new epoch) becomes a jump, so subscribers are told exactly
what they lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.broker import Sink
from ..core.history import Histories
from ..core.messages import Message
from ..core.positions import is_unstarted

NONE_RETIRED: frozenset[str] = frozenset()
"""A channel's retired epochs while it has none (most channels, always): one object shared by
every `Sequencer`, where an empty set of its own cost each followed channel 216 bytes."""


class Sequencer:
    """One channel's order. `epoch` is None until the first read (nothing applied yet)."""

    __slots__ = ("epoch", "history", "last_id", "name", "queue", "reading", "retired", "sink")

    def __init__(self, name: str, history: Histories, sink: Sink) -> None:
        self.name = name
        self.history = history
        self.sink = sink
        self.epoch: str | None = None
        self.last_id = 0
        self.retired = NONE_RETIRED
        """Epochs this channel has left: late messages and reads of them are dropped."""
        self.queue: list[Message] | None = None
        """Messages ahead of `last_id`, waiting for a read to fill the ids before them (None
        while there are none: a flood's channels, each followed for a few seconds, keep no
        empty list)."""
        self.reading = 0
        """Reads under way; queued messages are replayed when the last one is applied."""

    @property
    def loaded(self) -> bool:
        return self.epoch is not None

    def behind(self, epoch: str, seen: int) -> bool:
        """Whether a subscriber's position (from another node) is ahead of this node's state."""
        if self.epoch is None:
            return False
        if epoch == self.epoch:
            return seen > self.last_id
        return epoch not in self.retired

    def offer(self, message: Message, fetch: bool = True) -> bool:
        """Apply the message if it is the next one; True when the history must be read first.

        `fetch` is False for a publisher's own reply, whose notification follows anyway.
        """
        if self.epoch is not None:
            if message.epoch == self.epoch:
                if message.id <= self.last_id:
                    return False
                if message.id == self.last_id + 1:
                    self._append(message)
                    return False
            elif message.epoch in self.retired:
                return False
            elif message.id == 1 and is_unstarted(self.epoch):
                # The channel's first message: nothing comes before it, no read is needed. The
                # unstarted epoch is left like any other: a read that crossed this publish
                # still shows it, and must not take the channel back there.
                self.retired |= {self.epoch}
                self.epoch = message.epoch
                self._append(message)
                return False
        if not fetch:
            return False
        if self.queue is None:
            self.queue = [message]
        else:
            self.queue.append(message)
        return self.epoch is not None and not self.reading

    def read_from(self) -> tuple[str, int]:
        """What a read must fetch: messages of `epoch` after the returned id (-1: the last N,
        for a first read); pass it back to `apply` with the result. Call `done_reading` after,
        whatever happened."""
        self.reading += 1
        return (self.epoch or "", -1 if self.epoch is None else self.last_id)

    def done_reading(self) -> None:
        self.reading -= 1

    def apply(
        self, asked: tuple[str, int], epoch: str, last_id: int, messages: Sequence[Message]
    ) -> bool:
        """A read's result: what `read_from` asked for, the channel's epoch and last id, and the
        messages it returned (in id order). True when queued messages still skip ids and the
        history must be read again."""
        if self.epoch is None:
            self.epoch, self.last_id = epoch, last_id
            self.history.load(self.name, epoch, last_id, messages)
        elif epoch in self.retired or (epoch != self.epoch and asked[0] != self.epoch):
            # Read before one that already moved to a newer epoch, or issued before this node
            # reached its epoch at all (the channel's first publish crossed it): stale.
            return self.replay()
        elif epoch == self.epoch and (last_id <= self.last_id or self._contiguous(messages)):
            for message in messages:
                if message.id == self.last_id + 1:
                    self._append(message)
        else:
            self._jump(epoch, last_id, messages)
        return self.replay()

    def replay(self) -> bool:
        """Offer the queued messages again once no read is under way."""
        if not self.queue or self.reading:
            return False
        queued, self.queue = self.queue, None
        need = False
        for message in queued:
            need = self.offer(message) or need
        return need

    def _contiguous(self, messages: Sequence[Message]) -> bool:
        after = [m for m in messages if m.id > self.last_id]
        return bool(after) and after[0].id == self.last_id + 1

    def _append(self, message: Message) -> None:
        self.last_id = message.id
        self.history.append(message)
        self.sink.append(message)

    def _jump(self, epoch: str, last_id: int, messages: Sequence[Message]) -> None:
        if self.epoch is not None and epoch != self.epoch:
            self.retired |= {self.epoch}
        self.epoch, self.last_id = epoch, last_id
        self.history.reset(self.name, epoch, last_id, messages)
        self.sink.jump(self.name)
