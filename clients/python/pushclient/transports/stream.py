"""NDJSON over chunked HTTP: one JSON object per line, blank lines are heartbeats or padding."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp
from yarl import URL

from .base import Connected, Event, Transport, decode_event, iter_lines, open_response


class StreamTransport(Transport):
    name = "stream"
    path = "stream"

    async def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        async with open_response(session, url, params, idle, "application/x-ndjson") as resp:
            yield Connected()
            async for line in iter_lines(resp.content):
                if (event := ndjson_event(line)) is not None:
                    yield event


def ndjson_event(line: bytes) -> Event | None:
    """One NDJSON line as an event; a blank line (heartbeat, padding) is none."""
    return decode_event(line) if line.strip() else None
