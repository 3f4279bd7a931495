"""The broker contract: what the hub asks of a broker engine, and what an engine reports back.

Shaped after centrifuge's `Broker` and its three-method event handler. An engine assigns ids,
keeps each channel's history (`Broker.history`) and learns of messages published elsewhere; the
hub holds the subscribers, does the fan-out and is the engine's `Sink`. No engine touches
subscribers; the hub never writes a history.

**Positions.** A channel's messages have ids 1, 2, 3, ... within an epoch, with no id skipped
or repeated. A position is `(epoch, last id seen)` (`core.positions.Position`); a cursor is a
position per channel (`core.positions.Cursor`).

**Epochs.** A channel's epoch changes whenever its history is lost (the memory engine restarted
or dropped the channel when idle; Redis flushed, failed over to a replica that lacks writes, or
let the channel's keys expire). An epoch is an opaque string, never reused, so a cursor of a
lost history is recognised and never misread as a position in the new one. A channel nobody has
published to is in an unstarted epoch (`core.positions.unstarted`: the engine's generation, and
a tag that changes whenever an epoch of that channel may have ended), at id 0, and costs no
lasting state; its first message begins a real epoch whose `born` is that unstarted epoch, so a
cursor taken before the first message resumes without a gap.

**Gaps.** Loss is never silent. When ids a node never reported are gone (expired, trimmed, or
lost with an epoch), the engine moves the history on and calls `Sink.jump`; the hub tells every
subscriber held on the channel what it missed. A subscriber resuming from a cursor before what a
history still buffers is told the same (`ChannelHistory.backlog`).

**Ordering.** `Sink.append` gets each channel's messages strictly in id order, each once, after
the message is in `history`. An engine shared by several nodes (Redis) gets notifications out
of order, twice or not at all, and reads that cross them; it puts them in order through
`broker/ordering.Sequencer`, one per channel, which asks for a read of the history when ids are
missing and turns a history that moved on into a jump.

**What a shared engine must do.** Follow (listen to) every channel with a subscriber on this
node, from before the first read of its history, so nothing falls between the read and the
notifications; keep the histories it follows current in `history` and drop them once nobody
here has held them for a while (`Sink.audience`); read again when a subscriber's cursor is ahead
of what this node has seen (it came from another node); report a lost history as an epoch
change agreed by every node, and never hand out an id twice. Never block the event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol

from .history import ChannelInfo, Histories
from .messages import Message
from .positions import Position

__all__ = ["Broker", "ChannelInfo", "Item", "Sink", "new_item"]


class Item(NamedTuple):
    """One message to publish; `key` is its idempotency key (see `idempotency`), or None."""

    channel: str
    data: bytes
    key: str | None = None


new_item = functools.partial(tuple.__new__, Item)
"""`new_item((channel, data, key))` is `Item(channel, data, key)`, made by `tuple.__new__` in C:
the named tuple's own `__new__` is a Python function, a frame per message published
(docs/performance.md, "The publish path trimmed again", issue 35's sixth part)."""


class Sink(Protocol):
    """Where an engine reports: the hub. Every call is synchronous, on the event loop."""

    def append(self, message: Message) -> None:
        """`message` is its channel's next, in id order, already in `history`: fan it out."""

    def jump(self, name: str) -> None:
        """`name`'s history (in `history`, already moved) went on without this node: ids it
        never reported are gone, or a new epoch began. Whoever is held on it gets a gap."""

    def audience(self, name: str) -> int:
        """Subscribers held on this node for `name`: an engine keeps what they resume from, and
        follows the channel, while there are any."""


class Broker(Protocol):
    """An engine: ids, histories and the messages other nodes publish."""

    name: str
    """The engine's kind, for /stats and errors ("memory", "redis")."""

    history: Histories
    """The channels this node holds, by name: what subscribers resume from. Written by the
    engine only; the hub reads it synchronously for backlogs (once `subscribe` says a channel
    is current) and counts. Only `ChannelHistory` objects the engine has dropped or replaced
    are out of date, so the hub checks it holds the one `history` has."""

    @property
    def healthy(self) -> bool:
        """False while the engine cannot publish (Redis down); /healthz answers 503."""

    def running(self, sink: Sink) -> AbstractAsyncContextManager[None]:
        """Start (connect), report to `sink` until the context ends, then stop (disconnect).
        Every other call comes while it runs."""

    def publish(self, items: Sequence[Item]) -> list[Message] | Coroutine[Any, Any, list[Message]]:
        """Assign ids and store the messages; each reaches the sink through `append` (before
        this returns for an engine that holds the ids itself, later for one that learns of
        them from its backend). The messages come back in the order of `items`.

        An item whose key was seen on its channel is not published: its original message
        comes back. The messages when it needs no wait (the memory engine: the publish is then
        answered without a task); else a coroutine that has started nothing, to be awaited
        (or closed), which raises `Unavailable` (`broker_down`) when the backend cannot be
        reached and `Unavailable` (`outcome_unknown`) when it may have published without
        saying so."""

    def subscribe(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> Coroutine[Any, Any, None] | None:
        """Follow these channels for a new subscription (or a long-poll held again) and make
        their histories current in `history`.

        `positions` is the subscriber's cursor: a shared engine reads again when one is ahead
        of what this node has seen. None when every channel is current already (always, for
        the memory engine): the caller reads `history` at once, without a task. Else a
        coroutine, to be awaited (or closed: calling `subscribe` again is harmless), after
        which they are current; it raises `Unavailable` when the backend cannot be reached.
        """

    def unsubscribe(self, names: Sequence[str]) -> None:
        """A subscription on these channels ended (the hub counts it out of `audience` first):
        a shared engine may stop following a channel nobody holds; a channel nobody published
        to goes."""

    async def info(self, name: str) -> ChannelInfo | None:
        """The channel's state for GET /channels, or None if it does not exist."""
