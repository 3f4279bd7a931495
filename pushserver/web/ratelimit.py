"""The publish rate limit applied to requests (`--max-publish-rate`; see `core.ratelimit`)."""

from __future__ import annotations

import math

from ..core.errors import TooMany
from .state import ServerState


def publisher(remote: str | None, publish_key: str) -> str:
    """Whose bucket a request draws on (call after the publish key was checked)."""
    return "key" if publish_key else (remote or "-")


def enforce(state: ServerState, remote: str | None) -> None:
    """429 rate_limited with Retry-After when the publisher is over `--max-publish-rate`."""
    limiter = state.limiter
    if limiter is None:
        return
    wait = limiter.take(publisher(remote, state.settings.publish_key))
    if wait:
        state.hub.stats.limits_hit["max_publish_rate"] += 1
        raise TooMany(
            "rate_limited",
            f"more than {limiter.rate:g} publish requests per second",
            max(1, math.ceil(wait)),
        )
