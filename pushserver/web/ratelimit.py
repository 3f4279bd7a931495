"""The publish rate limit applied to requests (`--max-publish-rate`; see `core.ratelimit`)."""

from __future__ import annotations

import math

from aiohttp import web

from ..core.errors import TooMany
from ..core.ratelimit import RateLimiter
from .state import STATE

RATE_LIMITER = web.AppKey("pushserver_rate_limiter", RateLimiter)


def publisher(request: web.Request, publish_key: str) -> str:
    """Whose bucket a request draws on (call after the publish key was checked)."""
    return "key" if publish_key else (request.remote or "-")


def enforce(request: web.Request) -> None:
    """429 rate_limited with Retry-After when the publisher is over `--max-publish-rate`."""
    limiter = request.app.get(RATE_LIMITER)
    if limiter is None:
        return
    state = request.app[STATE]
    wait = limiter.take(publisher(request, state.settings.publish_key))
    if wait:
        state.hub.stats.limits_hit["max_publish_rate"] += 1
        raise TooMany(
            "rate_limited",
            f"more than {limiter.rate:g} publish requests per second",
            max(1, math.ceil(wait)),
        )
