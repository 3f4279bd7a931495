"""Taking a held stream away from aiohttp once its response head is out.

An NDJSON or SSE subscriber only receives what the fan-out writes to its transport, and its
connection is never reused (`Connection: close`), so after the head nothing of aiohttp's request
machinery is needed: yet the `RequestHandler` with its parser, the request, the response, the
writer and two tasks (the connection's and the handler's) would live as long as the connection,
7.7 KB of the 11.5 KB an idle held stream cost. `hand_off` makes the server's own protocol the
transport's protocol and runs aiohttp's teardown for a lost connection on the old one, so all of
that is freed; what stays is the transport and one object that is both protocol and subscriber.

This leans on two things aiohttp does not document as API: a protocol's `transport` attribute
(cleared first, so the teardown neither writes to nor closes the socket) and that the teardown
of `connection_lost` ends the request's tasks. `tests/test_handoff.py` checks both.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from .direct import SentResponse


def hand_off(request: web.Request, protocol: asyncio.Protocol) -> web.StreamResponse | None:
    """Give the request's connection to `protocol`; the handler returns what this returns.

    None means the client is already gone (nothing was handed off).
    """
    handler = request.protocol
    transport = handler.transport
    if transport is None or transport.is_closing():
        return None
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    handler.transport = None
    handler.connection_lost(None)
    return SentResponse()
