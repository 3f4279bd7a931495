"""Long-poll: one request per answer; the answer's cursor is where the next poll starts."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp
import orjson
from yarl import URL

from ..errors import NetworkError
from .base import Checkpoint, Connected, Event, Transport, open_response, parse_event


class LongPollTransport(Transport):
    name = "longpoll"
    path = "lp"
    polling = True

    def __init__(self, poll_timeout: float = 30.0) -> None:
        self.poll_timeout = poll_timeout

    async def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        # The server holds the request up to poll_timeout, so silence is only suspect after it.
        params = {**params, "timeout": f"{self.poll_timeout:g}"}
        idle += self.poll_timeout
        async with open_response(session, url, params, idle, "application/json") as resp:
            body = await resp.read()
        yield Connected()
        try:
            answer = orjson.loads(body)
            items, cursor = answer["messages"], answer["cursor"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise NetworkError(f"malformed long-poll answer: {body[:200]!r}") from exc
        for item in items:
            if (event := parse_event(item)) is not None:
                yield event
        yield Checkpoint(cursor)
