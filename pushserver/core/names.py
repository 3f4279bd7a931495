"""Channel names and the channel list of a subscription, parsed strictly."""

from __future__ import annotations

import re

from .errors import InvalidInput

CHANNEL_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


def is_channel(name: str) -> bool:
    return CHANNEL_RE.fullmatch(name) is not None


def parse_channel(name: str) -> str:
    if not is_channel(name):
        raise InvalidInput(
            "bad_channel", f"channel name {name[:140]!r} must match [A-Za-z0-9_.:@-]{{1,128}}"
        )
    return name


def parse_channels(spec: str, limit: int) -> tuple[str, ...]:
    """A subscription's comma-separated channel list, in order, without repeats."""
    names = spec.split(",")
    if len(names) > limit:
        raise InvalidInput(
            "too_many_channels", f"a subscription names at most {limit} channels, got {len(names)}"
        )
    return tuple(dict.fromkeys(parse_channel(n) for n in names))
