"""A graceful shutdown of the hub: what is held is told to go, and what is under way is waited for.

The web layer drains in this order: `drain` (polls answered with their cursor, streams told to
reconnect), `answered` (the broker has answered every publish and subscribe handed to it, so it
can be closed), then `all_gone` (every held connection unregistered and closed).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..wire.framing import longpoll_body
from .messages import control

if TYPE_CHECKING:
    from .hub import Hub


class Shutdown:
    """Counts what the broker holds and what lingers to close, and tells a shutdown when both
    are done."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.awaiting = 0
        """Publishes and subscribes handed to the broker that it has not answered."""
        self.closing: set[object] = set()
        """Connections out of the fan-out that still finish their close (`linger`)."""
        self.gone: asyncio.Future[None] | None = None
        """Set while a shutdown waits in `all_gone`; `check` resolves it."""
        self._answered: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()

    def back(self) -> None:
        """The broker answered a call `awaiting` counted."""
        self.awaiting -= 1
        answered = self._answered
        if not self.awaiting and answered is not None and not answered.done():
            answered.set_result(None)

    def drain(self) -> None:
        """Answer every long-poll with its cursor, tell every stream to reconnect."""
        for waiter in list(self.hub.waiters):
            waiter.resolve(longpoll_body([], waiter.cursor))
        for sub in list(self.hub.streams):
            body = control({"type": "reconnect", "cursor": sub.cursor})
            with contextlib.suppress(Exception):
                sub.transport.write(sub.wire([sub.framing.event(body, None)]))
            sub.close("shutdown")

    async def answered(self) -> None:
        """Wait until the broker has answered every publish and subscribe handed to it.
        Closing it sooner would fail a publish Redis is running as `504 outcome_unknown` (its
        client would retry one that was published), and leave a subscribe still opening with
        no answer."""
        if self.awaiting:
            self._answered = self._loop.create_future()
            await self._answered

    def linger(self, conn: object) -> None:
        """`conn` has left the fan-out but is still finishing its close (a WebSocket's closing
        handshake, bounded by its transport): a shutdown waits for it too (`closed`)."""
        self.closing.add(conn)

    def closed(self, conn: object) -> None:
        self.closing.discard(conn)
        if self.gone is not None:
            self.check()

    async def all_gone(self) -> None:
        """Wait until every held stream and long-poll has been unregistered, and every
        connection that lingers to close has closed."""
        hub = self.hub
        if hub.streams or hub.waiters or self.closing:
            self.gone = self._loop.create_future()
            await self.gone

    def check(self) -> None:
        """Something left: resolve `gone` if it was the last."""
        assert self.gone is not None
        hub = self.hub
        if not hub.streams and not hub.waiters and not self.closing and not self.gone.done():
            self.gone.set_result(None)
