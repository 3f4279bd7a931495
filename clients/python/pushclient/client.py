"""PushClient: publish to a pushserver and subscribe to its channels."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import aiohttp
import orjson
from yarl import URL

from .backoff import Backoff
from .errors import (
    InvalidURL,
    NetworkError,
    PushError,
    ServerError,
    TooManyRequests,
    error_from_response,
)
from .models import PublishResult, ServerHints, check_channel, check_channels
from .pollsize import DEFAULT_CAP
from .subscription import Subscription

DEFAULT_HEARTBEAT = 20.0


class PushClient:
    """A connection pool to one server; use it as `async with PushClient(url) as client:`.

    `heartbeat` is the server's heartbeat interval, read from `GET /stats` when not given
    (20 s when that fails); a stream silent for 2.5 times it is taken as dead. The long-poll
    cap (`longpoll_max_messages`) comes from the same answer (100, the server's default, when
    `heartbeat` is given or the answer fails; the server caps a larger `limit` anyway).
    `max_retries` bounds consecutive failed attempts of a subscription (None: retry forever).
    `publish_retries` is how often a publish is tried again after a network error, a 429 or a
    5xx; every publish carries an idempotency key, the same on each try, so a retry never
    publishes twice.
    """

    def __init__(
        self,
        url: str,
        *,
        publish_key: str | None = None,
        heartbeat: float | None = None,
        max_retries: int | None = None,
        backoff: Backoff | None = None,
        poll_timeout: float = 30.0,
        request_timeout: float = 30.0,
        publish_retries: int = 3,
    ) -> None:
        self.url = _base_url(url)
        self.publish_key = publish_key
        self.heartbeat = heartbeat
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.poll_timeout = poll_timeout
        self.request_timeout = request_timeout
        self.publish_retries = publish_retries
        self._session: aiohttp.ClientSession | None = None
        self._hints: ServerHints | None = None
        self._closed = False

    async def __aenter__(self) -> PushClient:
        self._get_session()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection, subscriptions' included; the client cannot be used again."""
        self._closed = True
        if self._session is not None:
            await self._session.close()

    def subscribe(
        self,
        channels: str | Iterable[str],
        *,
        transport: str = "sse",
        cursor: str | None = None,
        history: int = 0,
        token: str | None = None,
    ) -> Subscription:
        """Messages and gaps of `channels`: after `cursor` if given, else from now on (plus the
        last `history` buffered messages of each channel). The connection opens on iteration."""
        return Subscription(
            session=self._get_session,
            url=self.url,
            channels=check_channels(channels),
            transport=transport,
            cursor=cursor,
            history=history,
            token=token,
            hints=self._server_hints,
            poll_timeout=self.poll_timeout,
            backoff=self.backoff,
            max_retries=self.max_retries,
        )

    async def publish(
        self, channel: str, data: Any, *, idempotency_key: str | None = None
    ) -> PublishResult:
        """Publish one message. A `str` (or UTF-8 `bytes`) is sent as text and delivered as a
        JSON string; anything else is sent as JSON and delivered as that value. The
        idempotency key is a new UUID unless given."""
        if isinstance(data, str | bytes):
            body, content_type = data, "text/plain; charset=utf-8"
        else:
            body, content_type = orjson.dumps(data), "application/json"
        headers = {"Content-Type": content_type, "Idempotency-Key": idempotency_key or _key()}
        answer = await self._publish(f"pub/{check_channel(channel)}", body, headers)
        return _receipt(answer)

    async def publish_many(
        self, items: Iterable[tuple[str, Any] | Mapping[str, Any]]
    ) -> list[PublishResult]:
        """Publish a batch, in order, in one request: `(channel, data)` pairs or
        `{"channel": ..., "data": ...}` mappings (with an optional `"idempotency_key"`, else a
        new UUID). All are validated before any is published."""
        batch = [
            {
                "channel": item["channel"],
                "data": item["data"],
                "idempotency_key": item.get("idempotency_key") or _key(),
            }
            if isinstance(item, Mapping)
            else {"channel": item[0], "data": item[1], "idempotency_key": _key()}
            for item in items
        ]
        for item in batch:
            check_channel(item["channel"])
        answer = await self._publish(
            "pub", orjson.dumps(batch), {"Content-Type": "application/json"}
        )
        return [_receipt(one) for one in answer]

    async def _publish(self, path: str, body: bytes | str, headers: dict[str, str]) -> Any:
        """POST a publish, trying again (same body, same keys) while the outcome may change."""
        attempt = 0
        while True:
            try:
                return await self._request("POST", path, body, headers)
            except (NetworkError, ServerError, TooManyRequests) as exc:
                attempt += 1
                if attempt > self.publish_retries:
                    raise
                await asyncio.sleep(self.backoff.delay(attempt, exc.retry_after))

    async def channel(self, channel: str) -> dict[str, Any]:
        """`GET /channels/{channel}`: subscribers, last_id, buffered, epoch."""
        return await self._request("GET", f"channels/{check_channel(channel)}")

    async def stats(self) -> dict[str, Any]:
        """`GET /stats`: the server's connections, counters and settings."""
        return await self._request("GET", "stats")

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this PushClient is closed")
        if self._session is None:
            # No pool limit: every subscription holds a connection of its own.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def _server_hints(self) -> ServerHints:
        if self._hints is not None:
            return self._hints
        if self.heartbeat is not None:
            return ServerHints(self.heartbeat, DEFAULT_CAP)
        try:
            stats = await self.stats()
            hints = ServerHints(
                float(stats["heartbeat"]), int(stats.get("longpoll_max_messages", DEFAULT_CAP))
            )
        except (PushError, KeyError, TypeError, ValueError, AttributeError):
            return ServerHints(DEFAULT_HEARTBEAT, DEFAULT_CAP)
        self.heartbeat = hints.heartbeat
        self._hints = hints
        return hints

    async def health(self) -> bool:
        """`GET /healthz`: True when the server takes subscribers, False while it drains."""
        status, payload, headers = await self._send("GET", "healthz")
        if status not in (200, 503):
            raise error_from_response(status, payload, headers)
        return status == 200

    async def _request(
        self,
        method: str,
        path: str,
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        status, payload, answer_headers = await self._send(method, path, body, headers)
        if not 200 <= status < 300:
            raise error_from_response(status, payload, answer_headers)
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise NetworkError(f"malformed answer from {self.url}: {payload[:200]!r}") from exc

    async def _send(
        self,
        method: str,
        path: str,
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, Mapping[str, str]]:
        headers = dict(headers or {})
        if self.publish_key:
            headers["Authorization"] = f"Bearer {self.publish_key}"
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        try:
            async with self._get_session().request(
                method, self.url / path, data=body, headers=headers, timeout=timeout
            ) as resp:
                return resp.status, await resp.read(), resp.headers
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise NetworkError(f"cannot reach {self.url}: {exc or type(exc).__name__}") from exc


def _key() -> str:
    return str(uuid.uuid4())


def _base_url(url: str) -> URL:
    try:
        parsed = URL(url)
    except (TypeError, ValueError) as exc:
        raise InvalidURL(f"bad server URL {url!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidURL(f"bad server URL {url!r}: expected http://host:port")
    return parsed


def _receipt(answer: Any) -> PublishResult:
    try:
        return PublishResult(
            answer["channel"], answer["id"], answer["ts"], answer.get("subscribers", 0)
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise NetworkError(f"malformed publish answer: {str(answer)[:200]}") from exc
