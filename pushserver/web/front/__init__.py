"""The server's own HTTP/1.1 front end: every connection is accepted here.

Subscribe requests (`SUBSCRIBE_ROUTES`) are served from the first byte by `protocol.FrontProtocol`
and the transports it hands them to; every other request is passed, with the bytes already read,
to aiohttp through its public protocol factory (`web.Server`), over a `conduit.Conduit`.
"""

SUBSCRIBE_KINDS = ("lp", "stream", "sse", "ws")
"""The first path segment of each subscribe transport, in `web.server`'s order of handlers."""
SUBSCRIBE_ROUTES = tuple(f"/{kind}/{{channels}}" for kind in SUBSCRIBE_KINDS)
"""The paths the front end serves itself (aiohttp has no route for them)."""
