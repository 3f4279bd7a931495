"""Tables keyed by channel given back their room once most of what they held is gone.

A dict never shrinks on delete: after a sweep drops 100,000 channels, the hub's and the
broker's tables keep room for 100,000 (several MB each, from the C allocator) until they grow
again. A copy of a dict is sized for what it holds, so clearing the table and filling it back
from its copy hands that room back, in place (whoever holds the table keeps it).
"""

from __future__ import annotations

import sys
from typing import Any

ROOM_PER_ENTRY = 96
"""Bytes per entry a table sized for what it holds stays under (at most 72 on CPython)."""
SLACK = 256 * 1024
"""Bytes of room past that left alone: a small table is not worth a copy."""


def refit(table: dict[Any, Any]) -> bool:
    """Rebuild `table` in place, keeping its order, when it has room for far more than it
    holds; whether it did. A dict subclass is rebuilt through `dict` itself, so its own
    `pop` or `__delitem__` (what a channel's removal does) is not called."""
    if sys.getsizeof(table) <= ROOM_PER_ENTRY * len(table) + SLACK:
        return False
    kept = dict(table)
    dict.clear(table)
    dict.update(table, kept)
    return True
