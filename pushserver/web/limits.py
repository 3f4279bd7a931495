"""Which refusals are limits being hit, for `/stats` `limits_hit` (keyed by setting name).

Limits checked where the hub is at hand count themselves (connections, publish rate, slow
consumers); the ones found while parsing a request are counted here from the error they raise.
"""

from __future__ import annotations

from ..core.errors import PushError
from .state import ServerState

LIMIT_OF_ERROR = {
    "too_large": "max_message_bytes",
    "too_many_channels": "max_channels_per_subscription",
    "bad_timeout": "max_timeout",
}


def count(state: ServerState, exc: PushError) -> None:
    limit = LIMIT_OF_ERROR.get(exc.code)
    if limit is not None:
        state.hub.stats.limits_hit[limit] += 1
