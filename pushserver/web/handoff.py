"""Taking a held connection away from aiohttp while it waits, and giving it back.

A held subscriber only receives what the fan-out writes to its transport, so while it waits
nothing of aiohttp's request machinery is needed: yet the `RequestHandler` with its parser, the
request, the response, the writer and two tasks (the connection's and the handler's) would live
as long as the wait, 7.7 KB of the 11.5 KB an idle held connection cost. `hand_off` makes the
server's own protocol the transport's protocol and runs aiohttp's teardown for a lost connection
on the old one, so all of that is freed; what stays is the transport and one object that is
both protocol and subscriber. A stream keeps it to the end (`Connection: close`); an answered
long-poll's connection is given back to aiohttp (`give_back`) for the client's next request, as
if it had just been accepted.

This leans on three things aiohttp does not document as API: a protocol's `transport`
attribute (cleared first, so the teardown neither writes to nor closes the socket), that the
teardown of `connection_lost` ends the request's tasks, and the handler's `_manager`, the
server's protocol factory. `tests/test_handoff.py` checks all three.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from .direct import SentResponse

ProtocolFactory = Callable[[], asyncio.Protocol]


def http_protocol_factory(request: web.Request) -> ProtocolFactory:
    """What makes aiohttp's protocol for a newly accepted connection (its `web.Server`)."""
    return request.protocol._manager  # type: ignore[return-value]


def hand_off(
    request: web.Request, protocol: asyncio.Protocol, status: int = 200
) -> web.StreamResponse | None:
    """Give the request's connection to `protocol`; the handler returns what this returns
    (`status`, the status already sent, is for the access log).

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
    return SentResponse(status)


def give_back(transport: asyncio.Transport, factory: ProtocolFactory, received: bytes) -> None:
    """Hand a connection back to aiohttp, with any bytes the client sent meanwhile."""
    protocol = factory()
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    if received:
        protocol.data_received(received)
