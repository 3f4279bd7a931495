"""Where to try again a script a Redis Cluster answered with a redirect instead of running it.

While a slot moves from one primary to another (`CLUSTER SETSLOT ... MIGRATING/IMPORTING`,
`MIGRATE`, `SETSLOT ... NODE`), the source runs a script whose keys are all still there; it
answers one whose keys have all left `ASK` (send it to the importing primary, announced by
`ASKING` on the same connection), and one whose keys are split between the two `TRYAGAIN`. The
importing primary runs a script after `ASKING` only if every key it names exists there, and
answers `TRYAGAIN` otherwise: a publish names keys it is about to create (a new idempotency
key's), so in practice it waits, trying again every `PAUSE`, until the slot has changed hands
and the source answers `MOVED` (send it to the new owner). None of these ran the script, so it
may be sent again: a publish waits out a migration instead of being refused, for as long as the
cluster goes on answering that the slot is moving, up to `--redis-migration-wait`, past which the
migration is taken as stalled (an operator's reshard stopped half-way) and the last answer is the
request's (503; the publish was not made).
"""

from __future__ import annotations

from typing import NamedTuple

from redis.exceptions import AskError, MovedError, RedisError, TryAgainError

PAUSE = 0.02
"""Seconds before a script answered TRYAGAIN is sent again."""


class Retry(NamedTuple):
    node: str
    """host:port of the primary to send it to; '' for the one that owns the slot in the map."""
    asking: bool
    """Send `ASKING` first, on the same connection."""
    pause: float


def retry(exc: RedisError) -> Retry | None:
    """Where and how to send again a script `exc` answered; None when it cannot be."""
    if isinstance(exc, MovedError):  # a kind of AskError: first
        return Retry(f"{exc.host}:{exc.port}", False, 0.0)
    if isinstance(exc, AskError):
        return Retry(f"{exc.host}:{exc.port}", True, 0.0)
    if isinstance(exc, TryAgainError):
        return Retry("", False, PAUSE)
    return None
