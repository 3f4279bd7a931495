"""How long a subscribe request may need to be: its target and its `Last-Event-ID` at their
longest, the arithmetic `--max-line-size`, `--max-field-size` and `--max-head-bytes` are checked
against (config), so that every subscription the server accepts can come back with its cursor."""

from __future__ import annotations

LONGEST_NAME = 128
ID_AND_EPOCH = 32 + 18
"""An epoch and an id at their longest (docs/protocol.md; the unit tests check them, and
`LONGEST_NAME`, against `core.names` and `core.positions`): letters and digits, never encoded."""
SUBSCRIBE_PREFIX = len("/stream/") + len("?cursor=")
OTHER_PARAMETERS = 128
"""Bytes a subscribe target may need besides its channels and cursor (a token not counted)."""
OTHER_HEADERS = 4 << 10
"""Bytes a subscribe head may need besides its target and its `Last-Event-ID`."""


def longest_cursor(channels: int, encoded: bool = False) -> int:
    """Bytes of the longest cursor a subscription of `channels` channels may be handed; with
    `encoded`, as encodeURIComponent sends it in a query (`:`, `@` and `,` three bytes each, and
    a name may be all of them)."""
    grow = 3 if encoded else 1
    part = LONGEST_NAME * grow + ID_AND_EPOCH + 2 * grow
    return channels * (part + grow) - grow


def longest_subscribe_target(channels: int) -> int:
    """The longest target of a subscription of `channels` channels resuming from its cursor,
    the cursor percent-encoded as browsers' encodeURIComponent sends it."""
    names = channels * (LONGEST_NAME + 1) - 1
    return SUBSCRIBE_PREFIX + names + longest_cursor(channels, encoded=True) + OTHER_PARAMETERS
