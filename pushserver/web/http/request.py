"""A parsed request head: what the front end reads of a request, kept apart from the parser
(`parser.py`, interpreted) so that the compiled front end reads its fields as a native class's,
not each by name (docs/performance.md, "Lookups by name a publish did not need")."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class RequestHead:
    method: str
    target: str
    """The request target as sent (path and query), for the access log."""
    path: str
    query: dict[str, str]
    """The first value of each query parameter, as aiohttp's `request.query.get` gives it."""
    headers: dict[str, str]
    """Lower-cased names; a repeated list header's values joined with ", " (one of
    `parser.SINGLE` repeated is refused)."""
    version: str
    keep_alive: bool
    body_length: int
    """Content-Length, or -1 for a chunked body."""
    size: int
    """Bytes of the head, its blank line included."""
