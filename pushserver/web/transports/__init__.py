"""The subscribe transports: one module and one record (`exchange.Transport`) each.

`REGISTRY` is every transport the front end serves, in the order `/stats` and `/metrics` list
them. A new transport is its module (its handler, its `HEAD` checks, its framings in
`wire/framing.py`) and its record here.
"""

from __future__ import annotations

from . import longpoll, sse, stream, ws
from .exchange import Transport

REGISTRY: tuple[Transport, ...] = (
    longpoll.TRANSPORT,
    stream.TRANSPORT,
    sse.TRANSPORT,
    ws.TRANSPORT,
)
NAMES = tuple(transport.name for transport in REGISTRY)
"""Each transport's name, as operators see it."""
ROUTES = tuple(f"/{transport.segment}/{{channels}}" for transport in REGISTRY)
"""The subscribe paths (aiohttp has no route for them)."""
