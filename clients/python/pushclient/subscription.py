"""A subscription that heals itself: reconnects with backoff and resumes from its cursor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from types import TracebackType

import aiohttp
from yarl import URL

from .backoff import Backoff, Retries
from .errors import (
    NetworkError,
    PushError,
    RetriesExhausted,
    TokenExpired,
    is_retryable,
)
from .models import Gap, Message, ServerHints
from .pollsize import PollLimit
from .transports import make_transport
from .transports.base import Checkpoint, Connected, Expired, Reconnect, Transport
from .transports.longpoll import LongPollTransport

log = logging.getLogger("pushclient")

_NETWORK = (aiohttp.ClientError, TimeoutError, OSError)


class Subscription:
    """Iterate it (`async for item in sub`) for `Message`s and `Gap`s, in order, forever.

    `cursor` is the last cursor received: persist it and pass it to a later `subscribe` to
    resume. Iteration ends only by an exception: a final HTTP error (e.g. `Unauthorized`),
    `TokenExpired`, or `RetriesExhausted` once `max_retries` consecutive attempts failed.
    """

    def __init__(
        self,
        *,
        session: Callable[[], aiohttp.ClientSession],
        url: URL,
        channels: list[str],
        transport: str,
        cursor: str | None,
        history: int,
        token: str | None,
        hints: Callable[[], Awaitable[ServerHints]],
        poll_timeout: float,
        backoff: Backoff,
        max_retries: int | None,
    ) -> None:
        self.channels = channels
        self.transport = transport
        self.cursor = cursor
        self._poll_limit = PollLimit()
        self._transport = make_transport(
            transport, poll_timeout=poll_timeout, limit=self._poll_limit
        )
        self._url = url / self._transport.path / ",".join(channels)
        # A stream sends its first cursor with its first message; until then a drop would leave
        # nothing to resume from. So a subscription with no cursor starts with one immediate
        # long-poll, which answers with the head cursor (and any ?history messages).
        self._catch_up: tuple[Transport, URL] = (
            LongPollTransport(poll_timeout=0, limit=self._poll_limit),
            url / "lp" / ",".join(channels),
        )
        self._session = session
        self._history = history
        self._token = token
        self._hints = hints
        self._backoff = backoff
        self._max_retries = max_retries
        self._items: AsyncGenerator[Message | Gap, None] | None = None

    def __aiter__(self) -> AsyncIterator[Message | Gap]:
        return self

    async def __anext__(self) -> Message | Gap:
        if self._items is None:
            self._items = self._run()
        return await anext(self._items)

    async def aclose(self) -> None:
        """Close the connection now instead of when the iterator is garbage-collected."""
        if self._items is not None:
            await self._items.aclose()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _params(self) -> dict[str, str]:
        params = {"history": str(self._history)} if self._history else {}
        if self.cursor is not None:
            params["cursor"] = self.cursor
        if self._token is not None:
            params["token"] = self._token
        return params

    async def _run(self) -> AsyncGenerator[Message | Gap, None]:
        hints = await self._hints()
        self._poll_limit.set_cap(hints.longpoll_max_messages)
        # No byte for 2.5 heartbeats, heartbeat included, means the connection is dead.
        idle = 2.5 * hints.heartbeat
        retries = Retries(self._backoff)
        while True:
            error: PushError | None = None
            if self.cursor is None and not self._transport.polling:
                transport, url = self._catch_up
            else:
                transport, url = self._transport, self._url
            events = transport.events(self._session(), url, self._params(), idle)
            try:
                async with aclosing(events):
                    async for event in events:
                        if isinstance(event, Connected):
                            retries.progress()
                        elif isinstance(event, Reconnect):
                            self.cursor = event.cursor or self.cursor
                            error = NetworkError("the server asked to reconnect")
                            break
                        elif isinstance(event, Expired):
                            raise TokenExpired("the subscription token expired", cursor=self.cursor)
                        else:
                            self.cursor = event.cursor
                            if not isinstance(event, Checkpoint):
                                yield event
                if error is None:
                    if transport.polling:
                        continue
                    error = NetworkError("the server closed the stream")
            except PushError as exc:
                if not is_retryable(exc):
                    raise
                error = exc
            except _NETWORK as exc:
                error = NetworkError(f"{type(exc).__name__}: {exc}".rstrip(": "))
            delay = retries.failed(error.retry_after)
            if self._max_retries is not None and retries.failures > self._max_retries:
                raise RetriesExhausted(retries.failures, error, cursor=self.cursor) from error
            log.info("%s: %s; retry %d in %.2fs", self._url, error, retries.failures, delay)
            await asyncio.sleep(delay)
