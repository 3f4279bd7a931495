"""Connections whose request head is not finished yet.

Without a bound a client can open many connections, send long heads and never finish them:
each holds memory and a socket and, being no subscriber yet, escapes the connection limits. The
front end counts every connection that is receiving a head as a `head` connection (in the hub's
counts, so /stats shows them, and per address here) until the head is complete, refuses a head
past `--max-head-bytes`, and refuses a new connection at once while unfinished heads alone fill
`--max-connections` or the per-address limit (not counted against a trusted proxy, whose
connections carry many clients). A kept-alive connection waiting for its next request counts as
an unfinished head too. `--request-timeout` ends a head that takes too long.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..core.errors import PushError, TooMany, Unavailable
from .proxies import is_trusted

if TYPE_CHECKING:
    from ..config import Settings
    from ..core.hub import Hub

HEAD = "head"
"""The kind under which unfinished heads are counted in the hub's connections."""
LINGER = 2.0
"""Seconds a refused connection stays half-closed so that its client reads the answer: closing
with its request unread would reset the connection and could lose the answer."""


class Resting(Protocol):
    """A kept-alive connection waiting for its next request, as the guard sees it."""

    def close_resting(self) -> None:
        """Close it to make room; it no longer counts from now on."""
        ...


class HeadGuard:
    """Unfinished heads (the hub's `HEAD` count) and resting connections, per client address
    too under a per-address limit."""

    __slots__ = ("by_address", "counts", "hub", "per_ip", "resting", "settings")

    def __init__(self, hub: Hub, settings: Settings) -> None:
        self.hub = hub
        self.settings = settings
        self.counts = hub.connections
        self.by_address = bool(settings.max_connections_per_ip)
        """Whether `per_ip` is kept (only a per-address limit needs it)."""
        self.per_ip: dict[str, int] = {}
        """Unfinished heads and resting connections per address, counted only under a
        per-address limit: a long-poll's kept-alive connection rests between every two polls."""
        self.resting: dict[Resting, None] = {}
        """Kept-alive connections waiting for their next request, the longest waiting first:
        they count as unfinished heads, and are the first to go when those fill
        `--max-connections` (`reclaim`)."""

    def crowded(self) -> bool:
        """Whether connections waiting for a head fill `--max-connections`."""
        return self.counts.get(HEAD, 0) + len(self.resting) >= self.settings.max_connections

    def full(self, remote: str) -> PushError | None:
        """Why a new connection is refused: unfinished heads already fill a limit."""
        settings, hub = self.settings, self.hub
        if self.crowded():
            hub.stats.limits_hit["max_connections"] += 1
            return Unavailable("over_capacity", "too many connections with unfinished requests")
        per_ip = settings.max_connections_per_ip
        if (
            per_ip
            and self.per_ip.get(remote, 0) >= per_ip
            and not is_trusted(remote, settings.trusted_networks)  # a proxy brings many clients
        ):
            hub.stats.limits_hit["max_connections_per_ip"] += 1
            message = f"at most {per_ip} connections per client address"
            return TooMany("too_many_connections", message, retry_after=1)
        return None

    def start(self, remote: str) -> None:
        """Count an unfinished head (in the hub's counts by kind, not as a held connection)."""
        counts = self.counts
        counts[HEAD] = counts.get(HEAD, 0) + 1
        if self.by_address:
            self.enter(remote)

    def finish(self, remote: str) -> None:
        self.counts[HEAD] -= 1
        if self.by_address:
            self.leave(remote)

    def rest(self, conn: Resting, remote: str) -> None:
        """`conn`, kept alive, waits for its next request (`stir` when that wait ends)."""
        self.resting[conn] = None
        if self.by_address:
            self.enter(remote)

    def stir(self, conn: Resting, remote: str) -> None:
        del self.resting[conn]
        if self.by_address:
            self.leave(remote)

    def reclaim(self) -> None:
        """Close the connection that has rested longest, to make room for a new connection
        when waiting connections fill `--max-connections` (as nginx frees its idle keep-alive
        connections when it runs short)."""
        for conn in self.resting:
            conn.close_resting()
            return

    def enter(self, remote: str) -> None:
        """One more unfinished head or resting connection from `remote` (`by_address` only)."""
        self.per_ip[remote] = self.per_ip.get(remote, 0) + 1

    def leave(self, remote: str) -> None:
        left = self.per_ip[remote] - 1
        if left > 0:
            self.per_ip[remote] = left
        else:
            del self.per_ip[remote]
