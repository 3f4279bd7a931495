"""Channel names and cursors: the two strings clients hand back to the server.

Both are parsed strictly, so a stale or mangled cursor is refused with a 400 instead of being
misread as a position in another history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .errors import bad_request

CHANNEL_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
EPOCH_RE = re.compile(r"[A-Za-z0-9]{1,32}")
ID_RE = re.compile(r"[0-9]{1,18}")

Position = tuple[str, int]
"""A channel's (epoch, last id seen)."""


def is_channel(name: str) -> bool:
    return CHANNEL_RE.fullmatch(name) is not None


def parse_channel(name: str) -> str:
    if not is_channel(name):
        raise bad_request(
            "bad_channel", f"channel name {name[:140]!r} must match [A-Za-z0-9_.:@-]{{1,128}}"
        )
    return name


def parse_channels(spec: str, limit: int) -> tuple[str, ...]:
    """A subscription's comma-separated channel list, in order, without repeats."""
    names = spec.split(",")
    if len(names) > limit:
        raise bad_request(
            "too_many_channels", f"a subscription names at most {limit} channels, got {len(names)}"
        )
    channels = tuple(dict.fromkeys(parse_channel(n) for n in names))
    return channels


def format_position(channel: str, epoch: str, last_id: int) -> str:
    return f"{channel}:{epoch}:{last_id}"


def format_cursor(positions: Mapping[str, Position]) -> str:
    return ",".join(format_position(c, e, i) for c, (e, i) in positions.items())


def parse_cursor(text: str) -> dict[str, Position]:
    """`chan:EPOCH:ID,...` to {channel: (epoch, id)}; any flaw is a 400 bad_cursor."""
    positions: dict[str, Position] = {}
    if not text:
        return positions
    for part in text.split(","):
        pieces = part.rsplit(":", 2)
        if len(pieces) != 3:
            raise bad_request("bad_cursor", f"cursor part {part[:140]!r} is not channel:epoch:id")
        channel, epoch, last = pieces
        if not is_channel(channel) or not EPOCH_RE.fullmatch(epoch) or not ID_RE.fullmatch(last):
            raise bad_request("bad_cursor", f"cursor part {part[:140]!r} is malformed")
        if channel in positions:
            raise bad_request("bad_cursor", f"cursor names channel {channel!r} twice")
        positions[channel] = (epoch, int(last))
    return positions


def restrict(positions: Mapping[str, Position], channels: Iterable[str]) -> dict[str, Position]:
    """The cursor's positions for the channels of this subscription only."""
    return {c: positions[c] for c in channels if c in positions}
