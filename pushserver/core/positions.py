"""Positions and cursors: where a subscriber stands in each channel, and the string it hands back.

A cursor reads `channel:EPOCH:ID` joined with `,`, one part per channel. `cursor_part` is the one
place a part is written and `Cursor` the one type that reads a whole cursor and joins its parts,
so a stale or mangled cursor is refused instead of being misread as a position in another
history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

from .errors import InvalidInput
from .names import is_channel

EPOCH_RE: Final = re.compile(r"[A-Za-z0-9]{1,32}")
ID_RE: Final = re.compile(r"[0-9]{1,18}")
UNSTARTED_PREFIX: Final = "u"
"""Starts the epoch of a channel nobody has published to, so a subscribe to an empty channel
needs no lasting state. Real epochs start with hex and never with it."""
_HEX: Final = "0123456789abcdef"


def unstarted(generation: str, tag: str = "") -> str:
    """An unstarted epoch of a broker's generation (a memory broker's process, a Redis
    database's life, named in hex): a position (`unstarted(g, tag)`, 0) means "before the first
    message". A cursor from another generation (the server restarted, Redis lost its data) is
    another epoch, so what it missed is announced as a gap.

    A channel can also lose an epoch within a generation (dropped when idle, its Redis keys
    expired). `tag` (`epoch_tag`) tells the unstarted epochs of one channel apart: the broker
    changes it for a channel whose epoch may have ended, and every epoch carries the tag of the
    unstarted epoch it began after (`born`), so a cursor from before an earlier epoch never
    passes for one taken before this one."""
    return UNSTARTED_PREFIX + generation + tag


def epoch_tag(forgotten: int, ended: int) -> str:
    """The tag of a channel's unstarted epoch: `g` and how many names of its slot the broker has
    forgotten, `n` and how many epochs of it the broker counts, in hex; empty for the common
    case (nothing of either). Starts with a letter that is not hex, so `born` can find it."""
    return (f"g{forgotten:x}" if forgotten else "") + (f"n{ended:x}" if ended else "")


def born(untagged: str, epoch: str) -> str:
    """The unstarted epoch a cursor held if it was taken before `epoch`'s first message:
    `untagged`, the generation's (`unstarted(g)`), with `epoch`'s tag. An unstarted epoch of
    the generation is its own."""
    return untagged + epoch.removeprefix(UNSTARTED_PREFIX).lstrip(_HEX)


def is_unstarted(epoch: str) -> bool:
    return epoch[:1] == UNSTARTED_PREFIX  # not `startswith`: it parses its arguments each call


def cursor_part(channel: str, epoch: str, last_id: int) -> str:
    """One channel's part of a cursor; the only place its format is written."""
    return f"{channel}:{epoch}:{last_id}"


class Position(NamedTuple):
    """A channel's epoch and the last id seen in it."""

    epoch: str
    id: int

    def part(self, channel: str) -> str:
        return cursor_part(channel, self.epoch, self.id)


def _bad(message: str) -> InvalidInput:
    return InvalidInput("bad_cursor", message)


def _read_part(part: str) -> tuple[str, Position]:
    """One part of a cursor a client sent, checked; any flaw is InvalidInput `bad_cursor`."""
    pieces = part.rsplit(":", 2)
    if len(pieces) != 3:
        raise _bad(f"cursor part {part[:140]!r} is not channel:epoch:id")
    channel, epoch, last = pieces
    if not is_channel(channel) or not EPOCH_RE.fullmatch(epoch) or not ID_RE.fullmatch(last):
        raise _bad(f"cursor part {part[:140]!r} is malformed")
    last_id = int(last)
    if last_id and is_unstarted(epoch):  # "before the first message" has no id
        raise _bad(f"cursor part {part[:140]!r} puts an id in an unstarted epoch")
    return channel, Position(epoch, last_id)


class Cursor(dict[str, str]):
    """A whole cursor: each channel's part (`cursor_part`) by channel, in the order the
    subscription names them; the one type that parses a cursor a client sent and joins the
    parts into the string a client gets.

    Parts are kept as the strings they are sent as, so a multi-channel subscription moves one
    channel's part per event (`advance`) and never formats the others again.
    """

    __slots__ = ()

    @staticmethod
    def read(text: str, channels: Iterable[str] | None = None) -> dict[str, Position]:
        """The positions of `chan:EPOCH:ID,...` as a client sent it (of `channels` only, in
        their order, when given: a subscription's); any flaw is InvalidInput `bad_cursor`."""
        positions: dict[str, Position] = {}
        if text:
            for part in text.split(","):
                channel, position = _read_part(part)
                if channel in positions:
                    raise _bad(f"cursor names channel {channel!r} twice")
                positions[channel] = position
        if channels is None:
            return positions
        return {c: positions[c] for c in channels if c in positions}

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """A cursor as a client sent it, checked (`read`), its parts as the server writes them."""
        return cls.of(cls.read(text))

    @classmethod
    def of(cls, positions: Mapping[str, Position]) -> Cursor:
        return cls((channel, p.part(channel)) for channel, p in positions.items())

    def positions(self) -> dict[str, Position]:
        """Each channel's position."""
        return dict(map(_read_part, self.values()))

    def advance(self, channel: str, part: str) -> bytes:
        """Move `channel` to `part`; the whole cursor after it, as sent."""
        self[channel] = part
        return ",".join(self.values()).encode()

    def encode(self) -> bytes:
        return ",".join(self.values()).encode()

    def __str__(self) -> str:
        return ",".join(self.values())
