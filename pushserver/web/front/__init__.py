"""The server's own HTTP/1.1 front end: every connection is accepted here.

Each accepted socket gets a `protocol.FrontProtocol` (the asyncio side: transport, flow
control, timers, the door's counts) and a `connection.Connection` (HTTP/1.1 without I/O: bytes
in, requests routed, answers out). Subscribe requests (`web.transports.REGISTRY`) and
publishes (`publish.py`) are served from the first byte; every other request goes to aiohttp
(`forward.py`), through its public protocol factory, one request at a time.
"""

from typing import Final

IDLE: Final = 0
"""A connection's phase: reading request heads (`IDLE`); serving a request (`BUSY`); closed or
given away (`DONE`). Final, so the compiled build reads them as constants, not from a module's
dict (docs/performance.md, "Constants as constants")."""
BUSY: Final = 1
DONE: Final = 2
