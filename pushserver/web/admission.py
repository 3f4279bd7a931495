"""Who gets in: the connections this server holds, counted, and the limits on them.

Two kinds of connection count. A held subscriber (a long-poll waiting, a stream, a WebSocket)
counts from the moment its request is admitted (`Admission.admit`, before any `await`, so
requests arriving together all see each other) until it is let go (`Admission.leave`, exactly
once); `--max-connections` and `--max-connections-per-ip` bound them. A connection that is still
sending its request head, or is kept alive waiting for its next request, counts under `HEAD`
(`HeadGuard`): without a bound a client could open many connections, send long heads and never
finish them, each holding memory and a socket while escaping the subscriber limits.

When such connections fill `--max-connections`, a new one makes room (`HeadGuard.enter`): the
one that has waited longest for a head (sent nothing, or an unfinished head) or rested longest
kept alive gives way, if it has waited more than `--head-grace`; else the longest resting one
(a kept-alive connection between two requests). When neither exists (a flood of heads all
younger than the grace), the new connection comes in on the operators' reserve of `RESERVE`
connections, where only `/healthz` (a load balancer's check), `/stats` and `/metrics` are
served and any other request is refused with `503`; the longest waiting on the reserve gives
way to the next, so the flood a health check is meant to detect never refuses it at the door.
Under pressure a new connection's head timeout shortens (`HeadGuard.head_timeout`, after
nginx's `client_header_timeout` and HAProxy's `timeout http-request`). The per-address limit
refuses at once (not counted against a trusted proxy, whose connections carry many clients).
`--request-timeout` ends a head that takes too long.

`/stats` and `/metrics` read the counts from here (`Admission.connections`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final, Protocol

from ..core.errors import PushError, TooMany, Unavailable
from .proxies import is_trusted

if TYPE_CHECKING:
    from ..config import Settings

HEAD: Final = "head"
"""The kind under which unfinished heads are counted in `Admission.connections`."""
RESERVE: Final = 16
"""Connections over `--max-connections` waiting for a head on the operators' reserve: taken
only when no other waiting connection can give way; any request but theirs (`OPERATOR_PATHS`)
is refused."""
OPERATOR_PATHS: Final = frozenset({"/healthz", "/stats", "/metrics"})
"""What a connection on the reserve may ask for."""
LINGER: Final = 2.0
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


class Waiting(Protocol):
    """A connection waiting for a request head (or kept alive between requests), as the guard
    sees it."""

    reserved: bool
    """Let in on the operators' reserve (`RESERVE`): only their routes are served."""

    def give_way(self) -> None:
        """Close it to make room; it no longer counts from now on."""
        ...


class HeadGuard:
    """Unfinished heads (`Admission.connections[HEAD]`) and resting connections, per client
    address too under a per-address limit, and who gives way when they fill the door."""

    __slots__ = (
        "by_address",
        "counts",
        "heads",
        "limits_hit",
        "per_ip",
        "resting",
        "settings",
        "spares",
    )

    def __init__(self, admission: Admission) -> None:
        self.settings = settings = admission.settings
        self.limits_hit = admission.limits_hit
        self.counts = admission.connections
        self.by_address = bool(settings.max_connections_per_ip)
        """Whether `per_ip` is kept (only a per-address limit needs it)."""
        self.per_ip: dict[str, int] = {}
        """Unfinished heads and resting connections per address, counted only under a
        per-address limit: a long-poll's kept-alive connection rests between every two polls."""
        self.heads: dict[Waiting, float] = {}
        """Connections waiting for a head, the longest waiting first (`HEAD` counts them), and
        the loop time each began to wait: kept here, not on the connection, so a connection
        that no longer waits (a held long-poll) keeps no time of its own."""
        self.resting: dict[Waiting, float] = {}
        """Kept-alive connections waiting for their next request, the longest waiting first,
        and since when: they count as unfinished heads."""
        self.spares: dict[Waiting, None] = {}
        """Connections on the operators' reserve still waiting for their head, the longest
        waiting first."""

    def crowded(self) -> bool:
        """Whether connections waiting for a head fill `--max-connections`."""
        return len(self.heads) + len(self.resting) >= self.settings.max_connections

    def enter(self, conn: Waiting, remote: str, now: float) -> PushError | None:
        """Whether a new connection `conn` from `remote` comes in at loop time `now`: room made
        for it if need be (`make_room`), or a place on the operators' reserve
        (`conn.reserved`); else why it is refused."""
        settings = self.settings
        per_ip = settings.max_connections_per_ip
        if (
            per_ip
            and self.per_ip.get(remote, 0) >= per_ip
            and not is_trusted(remote, settings.trusted_networks)  # a proxy brings many clients
        ):
            self.limits_hit["max_connections_per_ip"] += 1
            message = f"at most {per_ip} connections per client address"
            return TooMany("too_many_connections", message, retry_after=1)
        if self.crowded() and not self.make_room(now):
            spares = self.spares
            if len(spares) >= RESERVE:  # a flood that took it: the longest on it gives way
                self.limits_hit["max_connections"] += 1
                next(iter(spares)).give_way()
            spares[conn] = None
            conn.reserved = True
        return None

    def over_capacity(self) -> PushError:
        """The refusal of a connection the door has no room for (counted)."""
        self.limits_hit["max_connections"] += 1
        return Unavailable("over_capacity", "too many connections with unfinished requests")

    def make_room(self, now: float) -> bool:
        """Close one waiting connection for a new one, if one may go: the one that has waited
        longest, whether for a head or for its next request, if longer than `--head-grace`;
        else the one resting longest (as nginx frees its idle keep-alive connections when it
        runs short). A young unfinished head is never closed: it may be a client's first
        request on a slow network. False when none may go."""
        head, head_since = next(iter(self.heads.items()), (None, now))
        rest, rest_since = next(iter(self.resting.items()), (None, now))
        cutoff = now - self.settings.head_grace
        if head is not None and head_since <= cutoff and (rest is None or head_since <= rest_since):
            head.give_way()
            return True
        if rest is not None:
            rest.give_way()
            return True
        return False

    def head_timeout(self) -> float:
        """How long a new connection may take to send its head: `--request-timeout` while at
        most half of `--max-connections` wait for one, then less in proportion to the room
        left, down to `--head-grace` when they fill it (the nginx `client_header_timeout` and
        HAProxy `timeout http-request` of a box under a connection flood)."""
        settings = self.settings
        timeout = settings.request_timeout
        free = 1 - (len(self.heads) + len(self.resting)) / settings.max_connections
        if free >= 0.5:
            return timeout
        return max(settings.head_grace, min(timeout, 2 * free * timeout))

    def start(self, conn: Waiting, remote: str, now: float) -> None:
        """Count an unfinished head (under `HEAD`, not as a held subscriber), begun at loop
        time `now`."""
        self.heads[conn] = now
        counts = self.counts
        counts[HEAD] = counts.get(HEAD, 0) + 1
        if self.by_address:
            self.per_ip[remote] = self.per_ip.get(remote, 0) + 1

    def finish(self, conn: Waiting, remote: str) -> None:
        del self.heads[conn]
        self.counts[HEAD] -= 1
        if self.by_address:
            _less(self.per_ip, remote)

    def rest(self, conn: Waiting, remote: str, now: float) -> None:
        """`conn`, kept alive, waits for its next request from loop time `now` (`stir` when
        that wait ends)."""
        self.resting[conn] = now
        if self.by_address:
            self.per_ip[remote] = self.per_ip.get(remote, 0) + 1

    def stir(self, conn: Waiting, remote: str) -> None:
        del self.resting[conn]
        if self.by_address:
            _less(self.per_ip, remote)

    def served(self, conn: Waiting) -> None:
        """`conn`, let in on the reserve, is served or gone: no longer on it (a connection
        served stays `reserved`: only the operators' routes, and counted as any other)."""
        self.spares.pop(conn, None)


def _less(counts: dict[str, int], remote: str) -> None:
    """One fewer for `remote`; an address with none left leaves the dict."""
    left = counts[remote] - 1
    if left > 0:
        counts[remote] = left
    else:
        del counts[remote]
