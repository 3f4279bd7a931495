"""How many messages a long-poll asks for (`?limit=`), after protocol.md's "How a client sizes
its polls": halve after a poll cut mid-body, double after one that arrived whole, between 1 and
the server's cap. On a link that drops every few kilobytes a fixed size livelocks: each failed
answer leaves the backlog bigger, so the next answer is bigger and fails too."""

from __future__ import annotations

DEFAULT_CAP = 100
"""The server's default `--longpoll-max-messages`, for when `/stats` cannot be read."""


class PollLimit:
    """The `limit` of the next poll; starts at the server's cap."""

    __slots__ = ("cap", "value")

    def __init__(self, cap: int = DEFAULT_CAP) -> None:
        self.cap = self.value = max(1, cap)

    def set_cap(self, cap: int) -> None:
        """The server's cap, once known; the limit never exceeds it."""
        self.cap = max(1, cap)
        self.value = min(self.value, self.cap)

    def cut_short(self) -> None:
        """The answer's head arrived but not its whole body."""
        self.value = max(1, self.value // 2)

    def arrived(self) -> None:
        """An answer arrived whole."""
        self.value = min(self.cap, self.value * 2)
