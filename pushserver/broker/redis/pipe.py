"""The Redis engine's publishing connection: script calls over a plain asyncio protocol.

redis-py's command path (pool, retry wrapper, timeouts, stream reader) costs a node about
140 µs of CPU per script call on the machine in docs/performance.md, whatever the call carries;
the same call packed by hiredis, written straight to the transport and read back by hiredis's
reader costs about 45 µs. Publishes already go one script call at a time (`coalesce`), so one
connection is all they need. Where to connect, and how to log in, is read from the connection
redis-py would make for the same URL, so the two never disagree; everything else the engine
asks of Redis stays with redis-py.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from collections.abc import Coroutine, Sequence
from typing import Any, cast

import hiredis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

Arg = str | bytes | int | float


class Script:
    """A Lua script, called by its digest; its text goes only to a Redis that lacks it."""

    __slots__ = ("sha", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()


class Replies(asyncio.Protocol):
    """Matches each reply to the oldest command still waiting: Redis answers in order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader(protocolError=RedisConnectionError, replyError=ResponseError)
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def send(self, command: bytes) -> asyncio.Future[Any]:
        assert self.transport is not None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(command)
        return future

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                future = self.waiting.popleft()
                if not future.done():
                    future.set_result(reply)
        except (RedisConnectionError, IndexError):  # garbled, or a reply nobody asked for
            self.abort()

    def abort(self) -> None:
        """Drop the connection; every command still waiting fails as lost."""
        self.lost = True  # at once: the transport tells only on the loop's next turn
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(RedisConnectionError("connection to Redis lost"))


class Pipe:
    """One connection for script calls, opened on first use and again after a loss.

    A call whose connection is lost, or that has no reply within `timeout` (the connection is
    then dropped), fails: whether its script ran is unknown, and the caller decides what that
    means. A cancelled call keeps its place in line, so its late reply answers nobody else.
    """

    def __init__(
        self, endpoint: AbstractConnection, timeout: float, connect_timeout: float
    ) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._loop = asyncio.get_running_loop()
        self._protocol: Replies | None = None
        self._connecting = asyncio.Lock()
        self._closed = False

    async def script(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        """EVALSHA, and EVAL when Redis does not have the script (it keeps it from then on)."""
        try:
            return await self.call("EVALSHA", script.sha, len(keys), *keys, *args)
        except ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await self.call("EVAL", script.text, len(keys), *keys, *args)

    async def call(self, *command: Arg) -> Any:
        """Send one command and return its reply; an error reply is raised as ResponseError."""
        protocol = self._protocol
        if protocol is None or protocol.lost:
            protocol = await self._connect()
        return await self._ask(protocol, command)

    def close(self) -> None:
        """Drop the connection for good: a call under way fails, later ones do not connect."""
        self._closed = True
        if self._protocol is not None:
            self._protocol.abort()
            self._protocol = None

    async def aclose(self) -> None:
        self.close()

    async def _ask(self, protocol: Replies, command: Sequence[Arg]) -> Any:
        # hiredis's stub types the tuple as one element long; any number are packed.
        future = protocol.send(hiredis.pack_command(cast(Any, tuple(command))))
        timer = self._loop.call_later(self.timeout, self._expire, protocol, future)
        try:
            reply = await future
        finally:
            timer.cancel()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def _expire(self, protocol: Replies, future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.set_exception(RedisTimeoutError(f"no reply from Redis in {self.timeout} s"))
            protocol.abort()

    async def _connect(self) -> Replies:
        async with self._connecting:
            if self._closed:
                raise RedisConnectionError("the connection to Redis is closed")
            if self._protocol is not None and not self._protocol.lost:
                return self._protocol
            try:
                _, protocol = await asyncio.wait_for(self._open(), self.connect_timeout)
            except TimeoutError:
                raise RedisTimeoutError("timed out connecting to Redis") from None
            try:
                for command in self._login():
                    await self._ask(protocol, command)
                if self._closed:  # while this connection was being opened
                    raise RedisConnectionError("the connection to Redis is closed")
            except BaseException:
                protocol.abort()
                raise
            self._protocol = protocol
            return protocol

    def _open(self) -> Coroutine[Any, Any, tuple[asyncio.BaseTransport, Replies]]:
        endpoint = self.endpoint
        if isinstance(endpoint, UnixDomainSocketConnection):
            return self._loop.create_unix_connection(Replies, endpoint.path)
        if not isinstance(endpoint, Connection):
            raise TypeError(f"no way to reach Redis through {type(endpoint).__name__}")
        ssl = endpoint.ssl_context.get() if isinstance(endpoint, SSLConnection) else None
        return self._loop.create_connection(Replies, endpoint.host, endpoint.port, ssl=ssl)

    def _login(self) -> list[tuple[Arg, ...]]:
        endpoint = self.endpoint
        commands: list[tuple[Arg, ...]] = []
        if endpoint.password is not None:
            user = () if endpoint.username is None else (endpoint.username,)
            commands.append(("AUTH", *user, endpoint.password))
        if endpoint.db:
            commands.append(("SELECT", endpoint.db))
        return commands
