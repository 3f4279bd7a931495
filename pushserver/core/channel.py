"""A channel as the hub holds it: who is held on it here, and how far the fan-out has gone."""

from __future__ import annotations

import time
from typing import Generic, TypeVar

from ..wire.compression import Chain
from ..wire.framing import Framing
from .history import ChannelHistory
from .messages import Event, Message
from .positions import Position, cursor_part, is_unstarted

S = TypeVar("S")
W = TypeVar("W")


class Channel(Generic[S, W]):
    """The subscribers held on one channel here: streams `S`, long-polls `W` (generic so that
    the channel knows nothing of the subscriber classes built on it), and the position the
    fan-out has reached. What subscribers resume from is the broker's (`history`).

    `sent_id` is the last id fanned out to local subscribers, in `epoch`; messages after it
    wait in `pending` for the next flush, which coalesces everything published in one loop
    iteration into one write per subscriber.

    Who is held (here, in the hub and in the front end's tables) is kept in dicts of None, not
    sets: a set's table grows to 4 times its members, 16 bytes a slot (105 bytes a member at
    19,900 held polls), a dict's entries and index take 27 to 54 bytes a member; and a dict is
    told in the order its members came, so a fan-out answers the poll held longest first.
    """

    __slots__ = (
        "chains",
        "epoch",
        "history",
        "idle_since",
        "multi",
        "name",
        "pending",
        "sent_id",
        "sent_position",
        "streams",
        "waiters",
    )

    def __init__(self, history: ChannelHistory) -> None:
        self.name = history.name
        self.history = history
        self.epoch = history.epoch
        self.sent_id = history.last_id
        self.sent_position = cursor_part(self.name, self.epoch, self.sent_id)
        self.pending: list[Message] = []
        self.streams: dict[Framing, dict[S, None]] = {}
        self.chains: dict[Framing, Chain] = {}
        """Per compressed framing, the frames deflated so far (the last one kept)."""
        self.waiters: dict[W, None] = {}
        self.multi: dict[S | W, None] = {}
        """Multi-channel subscribers (streams and polls) that include this channel."""
        self.idle_since = time.monotonic()

    @property
    def unstarted(self) -> bool:
        """Never published to: dropping it loses nothing, its epoch and ids start the same."""
        return is_unstarted(self.epoch)

    @property
    def held(self) -> bool:
        """Whether anyone is held on the channel here (`subscriber_count` > 0, found sooner)."""
        if self.waiters or self.multi:
            return True
        # a generator, which compiles to a loop; `any(self.streams.values())` calls the builtin
        return any(members for members in self.streams.values())

    @property
    def subscriber_count(self) -> int:
        """Every publish's receipt counts these. Loops, not `sum(map(len, ...))`: compiled, a
        loop over a dict's values is native, the builtins are looked up and called by name
        (2k instructions a publish to a channel held here)."""
        count = len(self.waiters) + len(self.multi)
        for members in self.streams.values():
            count += len(members)
        return count

    def mark_sent(self, message: Message) -> None:
        self.sent_id = message.id
        self.sent_position = message.position

    def follow(self, history: ChannelHistory) -> None:
        """Go on from `history` as it is now (a jump, or the broker's history of the channel
        replaced): everything it has counts as fanned out."""
        self.history = history
        self.epoch = history.epoch
        self.sent_id = history.last_id
        self.sent_position = cursor_part(self.name, self.epoch, self.sent_id)

    def backlog(
        self, position: Position | None, history: int, most: int | None = None
    ) -> list[Event]:
        """What a subscriber joining at `position` must get first: a gap, then messages
        (`ChannelHistory.backlog`, up to what was fanned out); its position after them is
        `sent_position`."""
        if position is not None and position == (self.epoch, self.sent_id):
            return []  # caught up: the usual re-poll, without a look at the history
        return self.history.backlog(position, history, self.sent_id, most)
