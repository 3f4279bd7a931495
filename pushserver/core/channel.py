"""A channel: its epoch, its ids, its bounded history and the subscribers held on it here."""

from __future__ import annotations

import time
from collections import deque
from typing import Generic, TypeVar

from ..wire.framing import Framing
from .errors import InvalidInput
from .messages import Event, Gap, Message
from .positions import Position, cursor_part, is_unstarted

S = TypeVar("S")
W = TypeVar("W")


class Channel(Generic[S, W]):
    """State of one channel on this server, and who is held on it: streams `S`, long-polls `W`
    (generic so that the channel knows nothing of the subscriber classes built on it).

    `last_id` is the last id assigned; `sent_id` the last id fanned out to local subscribers.
    Messages between the two wait in `pending` for the next flush, which coalesces everything
    published in one loop iteration into one write per subscriber.
    """

    __slots__ = (
        "born",
        "epoch",
        "history",
        "idle_since",
        "last_id",
        "multi",
        "name",
        "pending",
        "sent_id",
        "sent_position",
        "streams",
        "waiters",
    )

    def __init__(self, name: str, epoch: str, history_size: int, last_id: int = 0) -> None:
        self.name = name
        self.epoch = epoch
        self.last_id = last_id
        self.sent_id = last_id
        self.sent_position = cursor_part(name, epoch, last_id)
        self.history: deque[Message] = deque(maxlen=history_size)
        self.pending: list[Message] = []
        self.streams: dict[Framing, set[S]] = {}
        self.waiters: set[W] = set()
        self.multi: set[S | W] = set()
        """Multi-channel subscribers (streams and polls) that include this channel."""
        self.idle_since = time.monotonic()
        self.born: str | None = None
        """The unstarted epoch this epoch began after (`core.positions.born`): a cursor at
        (`born`, 0) was taken before its first message, after any earlier epoch of the channel
        ended, and missed nothing."""

    @property
    def unstarted(self) -> bool:
        """Never published to: dropping it loses nothing, its epoch and ids start the same."""
        return is_unstarted(self.epoch)

    @property
    def held(self) -> bool:
        """Whether anyone is held on the channel here (`subscriber_count` > 0, found sooner)."""
        return bool(self.waiters or self.multi or any(self.streams.values()))

    @property
    def subscriber_count(self) -> int:
        return sum(map(len, self.streams.values())) + len(self.waiters) + len(self.multi)

    def expire(self, ttl: float, now: float | None = None) -> None:
        """Drop history older than the TTL (the deque's maxlen bounds the count)."""
        history = self.history
        cutoff = (time.time() if now is None else now) - ttl
        while history and history[0].ts < cutoff and history[0].id <= self.sent_id:
            history.popleft()

    def mark_sent(self, message: Message) -> None:
        self.sent_id = message.id
        self.sent_position = message.position

    def reset(self, epoch: str, last_id: int) -> None:
        """Move to another epoch or past lost ids: nothing before `last_id` is buffered."""
        self.epoch = epoch
        self.last_id = self.sent_id = last_id
        self.sent_position = cursor_part(self.name, epoch, last_id)
        self.history.clear()

    def backlog(self, position: Position | None, history: int) -> list[Event]:
        """What a subscriber joining at `position` must get first: a gap, then messages.

        Only messages already fanned out count, so a pending one reaches the subscriber once,
        by the next flush; the subscriber's position after these events is `sent_position`.
        """
        if position is not None and position == (self.epoch, self.sent_id):
            return []  # caught up: the usual re-poll, without a pass over the history
        sent = [m for m in self.history if m.id <= self.sent_id]
        if position is None:
            return list(sent[-history:]) if history > 0 else []
        epoch, seen = position
        if seen == 0 and epoch == self.born:
            epoch = self.epoch  # joined before the first message of this epoch: nothing missed
        first = sent[0].id if sent else self.sent_id + 1
        after_gap = cursor_part(self.name, self.epoch, first - 1)
        if epoch != self.epoch:
            return [Gap(self.name, 1, first - 1, "epoch", after_gap), *sent]
        if seen > self.last_id:
            raise InvalidInput(
                "bad_cursor",
                f"cursor for {self.name!r} is at id {seen}, past the channel's last id "
                f"{self.last_id}",
            )
        events: list[Event] = []
        if seen < first - 1:
            events.append(Gap(self.name, seen + 1, first - 1, "expired", after_gap))
        events.extend(m for m in sent if m.id > seen)
        return events
