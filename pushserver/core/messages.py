"""Messages and gaps: what a subscriber receives, encoded once as the JSON envelope's bytes.

A message is encoded once and the same bytes go to every subscriber. Only a multi-channel
subscription needs its own cursor text, so an envelope is kept as a shared head (everything up
to the cursor) plus the per-subscription cursor and a fixed tail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from ..wire.framing import Framing
from .positions import cursor_part

ENVELOPE_TAIL: Final = b'"}'
DATA_KEY: Final = b',"data":'
CURSOR_KEY: Final = b',"cursor":"'
DATA_AND_CURSOR: Final = len(DATA_KEY) + len(CURSOR_KEY)
_dumps: Final = orjson.dumps
"""Compiled, read as this module's static, not looked up on orjson by name per call
(docs/performance.md, "Constants as constants")."""


class Message:
    """One message. Its envelope up to the cursor (`head`, shared by all framings) is made when
    first needed, so a message nobody receives costs no encoding until a history keeps it."""

    __slots__ = ("_head", "_position", "channel", "data", "epoch", "id", "seq", "ts")

    def __init__(self, channel: str, epoch: str, id: int, ts: float, data: bytes) -> None:
        self.channel = channel
        self.epoch = epoch
        self.id = id
        self.ts = ts
        self.data = data
        self.seq = 0
        """Arrival order on this server across channels, set when a history keeps it; orders
        multi-channel backlogs the way they were published."""
        self._position: str | None = None
        self._head: bytes | None = None

    @classmethod
    def kept(cls, channel: str, epoch: str, id: int, ts: float, seq: int, head: bytes) -> Message:
        """A message as a history keeps it: its envelope head, not its data."""
        message = Message(channel, epoch, id, ts, b"")
        message.seq = seq
        message._head = head
        return message

    @property
    def position(self) -> str:
        """The channel's cursor part after this message, made when first asked: a publish
        nobody is subscribed to never asks (0.9k of its compiled instructions)."""
        position = self._position
        if position is None:
            position = self._position = cursor_part(self.channel, self.epoch, self.id)
        return position

    @property
    def head(self) -> bytes:
        """The envelope up to its cursor: what every subscriber is sent, but the cursor."""
        head = self._head
        if head is None:
            head = self._head = b'{"channel":"%b","id":%d,"ts":%b,"data":%b,"cursor":"' % (
                self.channel.encode(),  # a channel's name needs no escaping (`core.names`)
                self.id,
                ts_json(self.ts),
                self.data,
            )
        return head

    @property
    def payload(self) -> bytes:
        """The published JSON value alone (the compact SSE framing's `data:`); a kept message
        has only its envelope head, where it stands between `"data":` and `"cursor":` (a
        channel's name has no quote, so the first `,"data":` is the key)."""
        if self.data:
            return self.data
        head = self.head
        return head[head.index(DATA_KEY) + len(DATA_KEY) : -len(CURSOR_KEY)]

    def receipt(self, subscribers: int) -> bytes:
        """What its publisher is told (`{"channel", "id", "ts", "subscribers"}` as JSON): the
        envelope's start up to its data, shared with what a history keeps (a channel's name
        has no quote, so the first `,"data":` is the key)."""
        head = self.head
        data = self.data  # a message's own data ends its head but for the cursor's key
        end = len(head) - len(data) - DATA_AND_CURSOR if data else head.index(DATA_KEY)
        return b'%b,"subscribers":%d}' % (head[:end], subscribers)

    def body(self, cursor: bytes) -> bytes:
        """The envelope, carrying the subscription's cursor after this message."""
        head = self._head
        if head is None:
            head = self.head
        return head + cursor + ENVELOPE_TAIL


def ts_json(ts: float) -> bytes:
    """`orjson.dumps(round(ts, 6))`, the envelope's `ts`, in integer steps that compile to C
    (`%.6f` cost 3k of a compiled publish's 45k instructions). From 2**13 s to 2**33 s (the year
    2242) a double's spacing is under a microsecond and its fraction times 10**6 is exact (at
    most 53 bits), so rounding that product half to even, as `%.6f` does, gives the rounded
    value's six decimals; cut of trailing zeros they are the shortest form, which orjson writes.
    The seconds and the decimals are written apart: `whole * 10**6` is past what a compiled
    multiply takes on its fast path (2**31), and boxed it cost 0.7k instructions a publish.
    Other times (a test's) go the long way."""
    if not 8192.0 <= ts < 8589934592.0:  # 2**13 .. 2**33
        return _dumps(round(ts, 6))
    whole = int(ts)
    scaled = (ts - whole) * 1e6
    micros = int(scaled)
    rest = scaled - micros
    if rest > 0.5 or (rest == 0.5 and micros & 1):
        micros += 1
    if micros % 1_000_000 == 0:  # a whole second (or rounded up to one) keeps its ".0"
        return b"%d.0" % (whole + micros // 1_000_000)
    digits = b"%d" % (micros + 1_000_000)  # "1" and the six decimals, zeros kept
    end = 7
    while micros % 10 == 0:
        micros //= 10
        end -= 1
    return b"%d.%b" % (whole, digits[1:end])


class Gap:
    """Messages `first`..`last` of a channel that a subscriber cannot get, and why."""

    __slots__ = ("channel", "first", "last", "position", "reason")

    seq = -1
    """Gaps sort before every message of a backlog."""

    def __init__(self, channel: str, first: int, last: int, reason: str, position: str) -> None:
        self.channel = channel
        self.first = first
        self.last = last
        self.reason = reason
        self.position = position

    def body(self, cursor: bytes) -> bytes:
        return control(
            {
                "type": "gap",
                "channel": self.channel,
                "from": self.first,
                "to": self.last,
                "reason": self.reason,
                "cursor": cursor.decode(),
            }
        )


Event = Message | Gap


def frame_events(
    framing: Framing, events: Sequence[Event], bodies: Sequence[bytes], cursors: Sequence[bytes]
) -> list[bytes]:
    """Each event as `framing` sends it, given its envelope and the cursor after it; a framing
    that sends a message's parts apart (`Framing.parts`) gets them."""
    if not framing.parts:
        # equal lengths; indexed: compiled, `map` or `zip(strict=)` is a builtin called by name
        return [framing.event(bodies[i], cursors[i]) for i in range(len(bodies))]
    return [
        framing.message(b, c, e.channel.encode(), e.payload)
        if isinstance(e, Message)
        else framing.event(b, c)
        for e, b, c in zip(events, bodies, cursors, strict=True)
    ]


def control(event: dict[str, Any]) -> bytes:
    """A control event (gap, reconnect, expired) as JSON bytes."""
    return _dumps(event)
