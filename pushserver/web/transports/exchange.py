"""What a subscribe transport is to the front end: one `Transport` record each.

A record names the transport twice, for two readers: its path segment (`lp` in `/lp/news`) for
clients, its name (`longpoll`) for operators (`/stats`, `/metrics`, the connection counts, the
`transport` label). It gives the handler that serves a `GET`, the checks that answer a `HEAD`
the way that `GET` would begin (RFC 9110 section 9.3.2), and the framings its events go out in
(none for long-poll, whose answer is one JSON body). `web/transports/__init__.REGISTRY` lists
the records; adding a transport is its module and its record there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ...wire.framing import Framing
from ..front.head import RequestHead

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol

Headers = list[tuple[str, str]]
Handler = Callable[["FrontProtocol", RequestHead], Awaitable[None] | None]
"""Serves a `GET`: at once, or in what it returns (awaited in a task)."""
Check = Callable[["FrontProtocol", RequestHead], Headers]
"""A `HEAD`'s checks: its `GET`'s, in the same order, raising what that `GET` would be refused
with; the headers of the head that `GET` would begin its answer with."""


@dataclasses.dataclass(frozen=True, slots=True)
class Transport:
    segment: str
    """The path's first segment: `/{segment}/{channels}`."""
    name: str
    """The name operators see: `/stats`, `/metrics`, the connection counts and limits."""
    serve: Handler
    probe: Check
    framings: tuple[Framing, ...] = ()
    """How its events are framed, each framing named `name` (the hub counts deliveries by
    framing name)."""

    def __post_init__(self) -> None:
        if any(framing.name != self.name for framing in self.framings):
            raise ValueError(f"transport {self.name!r} has a framing of another name")
