"""Who gets in: the connections this server holds, counted, and the limits on them.

Two kinds of connection count. A held subscriber (a long-poll waiting, a stream, a WebSocket)
counts from the moment its request is admitted (`Admission.admit`, before any `await`, so
requests arriving together all see each other) until it is let go (`Admission.leave`, exactly
once); `--max-connections` and `--max-connections-per-ip` bound them. A connection that is still
sending its request head, or is kept alive waiting for its next request, counts under `HEAD`
(`HeadGuard`): without a bound a client could open many connections, send long heads and never
finish them, each holding memory and a socket while escaping the subscriber limits. A new
connection is refused at once while such connections alone fill `--max-connections` or the
per-address limit (not counted against a trusted proxy, whose connections carry many clients);
the kept-alive one that has waited longest is closed to make room first. `--request-timeout`
ends a head that takes too long.

`/stats` and `/metrics` read the counts from here (`Admission.connections`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Protocol

from ..core.errors import PushError, TooMany, Unavailable
from .proxies import is_trusted

if TYPE_CHECKING:
    from ..config import Settings

HEAD = "head"
"""The kind under which unfinished heads are counted in `Admission.connections`."""
LINGER = 2.0
"""Seconds a refused connection stays half-closed so that its client reads the answer: closing
with its request unread would reset the connection and could lose the answer."""


class Admission:
    """Connections by kind (each transport's name, and `HEAD`) and held subscribers by client
    address, with the limits on them."""

    __slots__ = ("connections", "limits_hit", "per_ip", "settings", "total")

    def __init__(self, settings: Settings, limits_hit: Counter[str]) -> None:
        self.settings = settings
        self.limits_hit = limits_hit
        """Where a refusal is counted under the setting's name (`/stats` `limits_hit`)."""
        self.connections: dict[str, int] = {}
        """Connections by kind; plain dicts, not Counters, since every poll counts itself in
        and out and a dict subclass is the slower path for the interpreter."""
        self.total = 0
        """Held subscribers: `connections` summed over the transports, kept as they change,
        read on every subscribe (connections still sending a head are counted apart)."""
        self.per_ip: dict[str, int] = {}
        """Held subscribers by client address."""

    def admit(self, kind: str, remote: str) -> None:
        """Count a held subscriber of transport `kind` from `remote` (`leave` gives it back);
        raises PushError when the server or that address holds its maximum. Connections still
        sending their heads are bounded apart (`HeadGuard`): counting them here would refuse a
        subscriber for a mere admin request arriving at the same moment."""
        settings = self.settings
        if self.total >= settings.max_connections:
            self.limits_hit["max_connections"] += 1
            raise Unavailable(
                "over_capacity",
                f"server holds its maximum of {settings.max_connections} connections",
            )
        per_ip = settings.max_connections_per_ip
        if per_ip and self.per_ip.get(remote, 0) >= per_ip:
            self.limits_hit["max_connections_per_ip"] += 1
            raise TooMany(
                "too_many_connections", f"at most {per_ip} held connections per client address"
            )
        connections, by_address = self.connections, self.per_ip
        connections[kind] = connections.get(kind, 0) + 1
        self.total += 1
        by_address[remote] = by_address.get(remote, 0) + 1

    def leave(self, kind: str, remote: str) -> None:
        """A held subscriber `admit` counted is gone."""
        self.connections[kind] -= 1
        self.total -= 1
        _less(self.per_ip, remote)


class Resting(Protocol):
    """A kept-alive connection waiting for its next request, as the guard sees it."""

    def close_resting(self) -> None:
        """Close it to make room; it no longer counts from now on."""
        ...


class HeadGuard:
    """Unfinished heads (`Admission.connections[HEAD]`) and resting connections, per client
    address too under a per-address limit."""

    __slots__ = ("by_address", "counts", "limits_hit", "per_ip", "resting", "settings")

    def __init__(self, admission: Admission) -> None:
        self.settings = settings = admission.settings
        self.limits_hit = admission.limits_hit
        self.counts = admission.connections
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
        settings = self.settings
        if self.crowded():
            self.limits_hit["max_connections"] += 1
            return Unavailable("over_capacity", "too many connections with unfinished requests")
        per_ip = settings.max_connections_per_ip
        if (
            per_ip
            and self.per_ip.get(remote, 0) >= per_ip
            and not is_trusted(remote, settings.trusted_networks)  # a proxy brings many clients
        ):
            self.limits_hit["max_connections_per_ip"] += 1
            message = f"at most {per_ip} connections per client address"
            return TooMany("too_many_connections", message, retry_after=1)
        return None

    def start(self, remote: str) -> None:
        """Count an unfinished head (under `HEAD`, not as a held subscriber)."""
        counts = self.counts
        counts[HEAD] = counts.get(HEAD, 0) + 1
        if self.by_address:
            self.per_ip[remote] = self.per_ip.get(remote, 0) + 1

    def finish(self, remote: str) -> None:
        self.counts[HEAD] -= 1
        if self.by_address:
            _less(self.per_ip, remote)

    def rest(self, conn: Resting, remote: str) -> None:
        """`conn`, kept alive, waits for its next request (`stir` when that wait ends)."""
        self.resting[conn] = None
        if self.by_address:
            self.per_ip[remote] = self.per_ip.get(remote, 0) + 1

    def stir(self, conn: Resting, remote: str) -> None:
        del self.resting[conn]
        if self.by_address:
            _less(self.per_ip, remote)

    def reclaim(self) -> None:
        """Close the connection that has rested longest, to make room for a new connection
        when waiting connections fill `--max-connections` (as nginx frees its idle keep-alive
        connections when it runs short)."""
        for conn in self.resting:
            conn.close_resting()
            return


def _less(counts: dict[str, int], remote: str) -> None:
    """One fewer for `remote`; an address with none left leaves the dict."""
    left = counts[remote] - 1
    if left > 0:
        counts[remote] = left
    else:
        del counts[remote]
