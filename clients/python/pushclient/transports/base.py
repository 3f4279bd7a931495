"""What the transports share: the events they yield and how they open a subscribe request."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp
import orjson
from yarl import URL

from ..errors import NetworkError, error_from_response
from ..models import Gap, Message


@dataclass(frozen=True, slots=True)
class Connected:
    """The server accepted the request: the connection works, reset the backoff."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A cursor with no message (the end of a long-poll): resume from it."""

    cursor: str


@dataclass(frozen=True, slots=True)
class Reconnect:
    """The server is going away: reconnect, with backoff, from `cursor`."""

    cursor: str | None


@dataclass(frozen=True, slots=True)
class Expired:
    """The subscription token expired."""


Event = Message | Gap | Connected | Checkpoint | Reconnect | Expired


class Transport(ABC):
    """Turns one subscribe request into events; raises on any failure, returns when it ends."""

    name: ClassVar[str]
    path: ClassVar[str]
    polling: ClassVar[bool] = False  # True: a normal end is the end of one poll, not a drop

    @abstractmethod
    def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        """Yield events; `idle` is how long to wait for the next byte before calling it dead."""


def decode_event(raw: bytes) -> Event | None:
    """Parse one wire object from its JSON text."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise NetworkError(f"malformed event from the server: {raw[:200]!r}") from exc
    return parse_event(obj)


def parse_event(obj: Any) -> Event | None:
    """One wire object as an event; unknown control types give None (the protocol says ignore)."""
    try:
        kind = obj.get("type")
        if kind is None:
            return Message(obj["channel"], obj["id"], obj["ts"], obj.get("data"), obj["cursor"])
        if kind == "gap":
            return Gap(obj["channel"], obj["from"], obj["to"], obj["reason"], obj["cursor"])
    except (AttributeError, KeyError, TypeError) as exc:
        raise NetworkError(f"malformed event from the server: {str(obj)[:200]}") from exc
    if kind == "reconnect":
        return Reconnect(obj.get("cursor"))
    if kind == "expired":
        return Expired()
    return None


@asynccontextmanager
async def open_response(
    session: aiohttp.ClientSession,
    url: URL,
    params: Mapping[str, str],
    idle: float,
    accept: str,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """GET a subscribe URL; a non-200 answer raises its typed error. On the way out a fully
    read connection goes back to the pool; one left mid-way is closed, it cannot be reused.

    It asks for gzip: aiohttp decodes a gzip answer as its bytes arrive (the server flushes
    every message), so the body reads the same whether the server compressed it or not."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=idle, sock_read=idle)
    headers = {"Accept": accept, "Accept-Encoding": "gzip"}
    async with session.get(url, params=params, headers=headers, timeout=timeout) as resp:
        try:
            if resp.status != 200:
                raise error_from_response(resp.status, await resp.read(), resp.headers)
            yield resp
        finally:
            if resp.content.is_eof():
                resp.release()
            else:
                resp.close()


class LineSplitter:
    """Complete lines only, without their `\\n` or `\\r\\n`, from bytes in the pieces they
    arrive in: a line cut short by a dropped connection is never seen."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]


async def iter_lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The body's complete lines, as `LineSplitter` cuts them."""
    lines = LineSplitter()
    async for chunk in content.iter_any():
        for line in lines.feed(chunk):
            yield line
