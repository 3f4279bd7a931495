"""The server's own HTTP/1.1 front end: every connection is accepted here.

Subscribe requests (`SUBSCRIBE_ROUTES`) are served from the first byte by `protocol.FrontProtocol`
and the transports it hands them to; every other request is passed, with the bytes already read,
to aiohttp through its public protocol factory (`web.Server`), over a `conduit.Conduit`.
"""

SUBSCRIBE_ROUTES = ("/lp/{channels}", "/stream/{channels}", "/sse/{channels}", "/ws/{channels}")
"""The paths the front end serves itself (aiohttp has no route for them)."""
