"""A loopback TCP proxy owned by a test, to break the connections it carries on purpose.

`cut_after` draws, for each new connection, how many server-to-client bytes to forward before
cutting it (None: never), so cuts land anywhere, mid-message included. `stall()` makes every
current connection stop forwarding without closing it, like a dead mobile link; `hold()` and
`resume()` do it for a while, like a slow one, the bytes held forwarded in order after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType


class TcpProxy:
    def __init__(
        self,
        upstream_port: int,
        *,
        upstream_host: str = "127.0.0.1",
        cut_after: Callable[[], int | None] | None = None,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.cut_after = cut_after
        self.connections = 0  # accepted so far
        self.cuts = 0
        self.cuts_mid_line = 0  # cuts whose last forwarded byte was not a newline
        self.answers: list[bytes] = []  # the first bytes the server sent on each connection
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the proxy first"
        return self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            for pump in link.pumps:
                pump.cancel()
        await asyncio.gather(*(link.done.wait() for link in list(self._links)))
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def stall(self) -> None:
        """Stop forwarding on every current connection, in both directions, keeping it open."""
        for link in self._links:
            link.stalled.set()

    def hold(self) -> None:
        """Forward nothing more on any connection until `resume()`, keeping what arrives."""
        for link in self._links:
            link.flowing.clear()

    def resume(self) -> None:
        for link in self._links:
            link.flowing.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        link = _Link()
        budget = self.cut_after() if self.cut_after else None
        link.pumps = [
            asyncio.create_task(self._pump(reader, up_writer, link, None)),
            asyncio.create_task(self._pump(up_reader, writer, link, budget, self.answers)),
        ]
        self._links.add(link)
        await asyncio.wait(link.pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in link.pumps:
            pump.cancel()
        await asyncio.gather(*link.pumps, return_exceptions=True)
        for end in (writer, up_writer):
            end.close()
        self._links.discard(link)
        link.done.set()

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        link: _Link,
        budget: int | None,
        first: list[bytes] | None = None,
    ) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                if first is not None:
                    first.append(data)
                    first = None
                if link.stalled.is_set():
                    await asyncio.Future()  # hold the bytes and the connection forever
                await link.flowing.wait()
                if budget is not None and len(data) >= budget:
                    dst.write(data[:budget])
                    await dst.drain()
                    self.cuts += 1
                    self.cuts_mid_line += not data[:budget].endswith(b"\n")
                    return
                if budget is not None:
                    budget -= len(data)
                dst.write(data)
                await dst.drain()


class _Link:
    """One proxied connection: its two pumps, its stall and hold switches, and whether it is
    over."""

    def __init__(self) -> None:
        self.pumps: list[asyncio.Task] = []
        self.stalled = asyncio.Event()
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.done = asyncio.Event()
