"""The broker interface: what the hub asks of a broker, and what a broker reports back.

The hub owns its broker and is the broker's `Sink`. A broker assigns ids, keeps (or reaches)
the history and learns of messages published elsewhere; it reports messages to the sink strictly
in id order, and says when a channel's history moved on without it (a jump: ids lost, or a new
epoch). It never touches the hub's channels or subscribers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from .messages import Message
from .positions import Position


class ChannelInfo(NamedTuple):
    """A channel's state as the broker knows it, for GET /channels."""

    epoch: str
    last_id: int
    buffered: int


class Item(NamedTuple):
    """One message to publish; `key` is its idempotency key (see `idempotency`), or None."""

    channel: str
    data: bytes
    key: str | None = None


class Sink(Protocol):
    """Where a broker reports (the hub)."""

    def state(self, name: str) -> Position | None:
        """The epoch and last id this node holds for `name`, or None if it holds nothing."""

    def load(self, name: str, epoch: str, last_id: int, messages: Sequence[Message]) -> None:
        """A channel's state read from the broker for the first time."""

    def append(self, message: Message) -> None:
        """The channel's next message, in id order: store it and fan it out."""

    def jump(self, name: str, epoch: str, last_id: int, messages: Sequence[Message]) -> None:
        """The history moved on without this node: what it missed is gone (ids expired, or a
        new epoch); `messages` are what is still buffered. Subscribers get a gap."""

    def audience(self, name: str) -> int:
        """Subscribers held on this node for `name`."""

    def snapshot(self, name: str) -> ChannelInfo | None:
        """The local state of `name`, for a broker whose local state is the whole truth."""

    def forget(self, name: str) -> None:
        """The broker no longer follows `name`; drop its local state if nobody holds it."""


class Broker(Protocol):
    name: str
    unstarted: str
    """The unstarted epoch of the broker's current generation, untagged
    (`core.positions.unstarted`): every epoch it holds began in this generation, after the
    unstarted epoch `core.positions.born` names."""

    @property
    def healthy(self) -> bool:
        """False while the broker cannot publish (Redis down); /healthz answers 503."""

    def bind(self, sink: Sink) -> None:
        """Set the sink; called once by the hub before `start`."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def publish(self, items: Sequence[Item]) -> list[tuple[Message, int]]:
        """Assign ids and store the messages; each reaches the sink through `append`. Returns
        each message with the local audience it was handed to (counted before any await). An
        item whose key was seen on its channel is not published: its original result is
        returned. Raises `OutcomeUnknown` when the broker may have published without saying."""

    def publish_now(self, items: Sequence[Item]) -> list[tuple[Message, int]] | None:
        """`publish` when it needs no wait (the broker holds the ids itself): its result then;
        None, having done nothing, when the caller must await `publish`. Lets a publish whose
        body is at hand be answered without a task."""

    async def follow(self, names: Sequence[str], positions: Mapping[str, Position]) -> None:
        """Make sure the sink holds the current state of these channels, for a new subscription.

        `positions` is the subscriber's cursor: a broker shared by several nodes reads again
        when the cursor is ahead of what this node has seen (it came from another node).
        Raises `Unavailable` when the broker cannot be reached.
        """

    def follow_now(self, names: Sequence[str], positions: Mapping[str, Position]) -> bool:
        """`follow` when it needs no wait (the channels are at hand and current): True then;
        False when the caller must await `follow`. Lets a re-poll skip a task."""

    def current(self, name: str) -> bool:
        """Whether the sink's state of `name`, which it holds, may be used as it is: a re-poll at
        the channel's head is then held on it (`follow_now` without a cursor, made cheap for
        the engine whose sink is the whole truth)."""

    def following(self, name: str) -> bool:
        """Whether the broker keeps `name` in the sink (the hub's idle sweep leaves it)."""

    def release(self, names: Sequence[str]) -> None:
        """A subscription on these channels ended (a shared broker may stop listening)."""

    def dropped(self, name: str) -> None:
        """The hub's idle sweep dropped `name`, which had messages. Where the sink is the whole
        truth (memory) its epoch is gone, and its next unstarted epoch must differ."""

    async def info(self, name: str) -> ChannelInfo | None:
        """The channel's state for GET /channels, or None if it does not exist."""
