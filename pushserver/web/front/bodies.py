"""Request bodies on a connection: taken whole from what came with the head, or read as they
arrive within `--request-timeout` (`Reading`), or refused unread, closing the connection (the
part of `connection.Connection` that reads bodies; the decoding is `http.body`'s)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..http import answer
from ..http.body import Body
from ..http.request import RequestHead
from . import DONE
from .base import Base

if TYPE_CHECKING:
    from ..transports.exchange import Headers


class Bodies(Base):
    """What a connection does with request bodies (its state is the connection's `reader`)."""

    __slots__ = ()

    def body(self, length: int, limit: int, coding: str | None) -> bytes | Body:
        buffer = self.buffer
        if coding is None and 0 <= length <= limit and length <= len(buffer):
            if length == len(buffer):
                self.buffer = b""
                return buffer
            self.buffer = buffer[length:]
            return buffer[:length]
        body = Body(length, limit, coding)
        self.buffer = body.feed(buffer)
        return body

    def read_rest(self, body: Body, expect: bool) -> Awaitable[None] | None:
        if body.over:
            return None
        if expect:
            self.send(answer.CONTINUE)
        return Reading(self, body).waiter

    def read_into(self, reader: Callable[[bytes], bytes] | None) -> None:
        """Send what the client sends from now on to `reader` (None: back to keeping it)."""
        self.reader = reader
        if reader is not None:
            self.io.resume()

    def refuse_unread(self, head: RequestHead, status: int, headers: Headers, body: bytes) -> None:
        self.held = None
        self.read_into(None)
        if self.out.is_closing():
            return
        self.answer(dataclasses.replace(head, keep_alive=False), status, headers, body)
        self.phase = DONE
        self._let_go_kept()
        self.io.linger()


class Reading:
    """The rest of a request body, read as it arrives, within `--request-timeout`."""

    __slots__ = ("body", "conn", "waiter")

    def __init__(self, conn: Bodies, body: Body) -> None:
        self.conn = conn
        self.body = body
        self.waiter: asyncio.Future[None] = conn.front.loop.create_future()
        conn.hold(self, conn.front.timeout)
        conn.read_into(self.feed)

    def feed(self, data: bytes) -> bytes:
        rest = self.body.feed(data)
        if self.body.over:
            self._over(None)
        return rest

    def _over(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn.held is self:
            conn.held = None
        conn.read_into(None)
        if not self.waiter.done():
            if exc is None:
                self.waiter.set_result(None)
            else:
                self.waiter.set_exception(exc)

    def expire(self) -> None:
        self._over(ConnectionError("request body not received within --request-timeout"))
        self.conn.io.close()

    def lost(self) -> None:
        self._over(ConnectionError("the client left mid-body"))
