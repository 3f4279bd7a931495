"""The server's own HTTP/1.1 front end: every connection is accepted here.

Subscribe requests (the transports of `web.transports.REGISTRY`) and publishes are served from
the first byte by `protocol.FrontProtocol`; every other request is passed, with the bytes
already read, to aiohttp through its public protocol factory (`web.Server`), over a
`conduit.Conduit`.
"""
