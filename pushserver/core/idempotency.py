"""Publish idempotency: a key a publisher sends with a message, so that a retry after an
unknown outcome (a timeout, a lost connection) can never publish the message twice.

A key is scoped to its channel and remembered with what the publish produced (epoch, id, ts)
for at least the history TTL; a publish that repeats a remembered key is answered with the
original result and publishes nothing. The Redis engine keeps keys in Redis (see its publish
script); the memory engine keeps them here, bounded.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import Final, NamedTuple

from .errors import InvalidInput

KEY_MAX: Final = 128
KEY_RE: Final = re.compile(rf"[!-~]{{1,{KEY_MAX}}}")
"""Printable ASCII without spaces, as a header value carries it unchanged."""
MEMORY_KEYS: Final = 65536
"""Keys the memory engine remembers at most; past that the oldest are forgotten first."""


class Published(NamedTuple):
    """What a keyed publish produced: enough to answer its repeats."""

    epoch: str
    id: int
    ts: float


def check_key(raw: object, where: str) -> str | None:
    """The key as sent (None when absent); a malformed one is the client's error."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not KEY_RE.fullmatch(raw):
        raise InvalidInput(
            "bad_idempotency_key",
            f"{where} must be 1 to {KEY_MAX} printable ASCII characters without spaces",
        )
    return raw


class KeyMemory:
    """The memory engine's keys: each kept for `ttl` seconds, at most `size` of them."""

    def __init__(self, ttl: float, size: int = MEMORY_KEYS) -> None:
        self.ttl = ttl
        self.size = size
        self._keys: OrderedDict[tuple[str, str], tuple[float, Published]] = OrderedDict()

    def get(self, channel: str, key: str) -> Published | None:
        self._expire()
        kept = self._keys.get((channel, key))
        return None if kept is None else kept[1]

    def put(self, channel: str, key: str, published: Published) -> None:
        self._keys[(channel, key)] = (time.monotonic() + self.ttl, published)
        if len(self._keys) > self.size:
            self._keys.popitem(last=False)

    def _expire(self) -> None:
        now = time.monotonic()
        keys = self._keys
        while keys:
            first = next(iter(keys.values()))
            if first[0] > now:
                return
            keys.popitem(last=False)
