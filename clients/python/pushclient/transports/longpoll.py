"""Long-poll: one request per answer; the answer's cursor is where the next poll starts.

Each poll asks for `limit` events, sized by `PollLimit` from how the last polls went."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp
import orjson
from yarl import URL

from ..errors import NetworkError
from ..pollsize import PollLimit
from .base import Checkpoint, Connected, Event, Transport, open_response, parse_event

_CUT_SHORT = (aiohttp.ClientError, TimeoutError, OSError)


class LongPollTransport(Transport):
    name = "longpoll"
    path = "lp"
    polling = True

    def __init__(self, poll_timeout: float = 30.0, limit: PollLimit | None = None) -> None:
        self.poll_timeout = poll_timeout
        self.limit = limit or PollLimit()

    async def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        # The server holds the request up to poll_timeout, so silence is only suspect after it.
        params = {**params, "timeout": f"{self.poll_timeout:g}", "limit": str(self.limit.value)}
        idle += self.poll_timeout
        async with open_response(session, url, params, idle, "application/json") as resp:
            yield Connected()  # the answer began: progress, whatever happens to its body
            try:
                body = await resp.read()
            except _CUT_SHORT:
                self.limit.cut_short()
                raise
        self.limit.arrived()
        for event in parse_answer(body):
            yield event


def parse_answer(body: bytes) -> list[Event]:
    """A long-poll answer's events, then the `Checkpoint` of its cursor; unknown control types
    are skipped and `more` needs nothing here: the next poll starts at once anyway."""
    try:
        answer = orjson.loads(body)
        items, cursor = answer["messages"], answer["cursor"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise NetworkError(f"malformed long-poll answer: {body[:200]!r}") from exc
    events = [event for item in items if (event := parse_event(item)) is not None]
    return [*events, Checkpoint(cursor)]
