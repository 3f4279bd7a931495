"""Server-Sent Events: `data:` lines up to a blank line make one event; `:` lines are heartbeats.

The envelope inside `data:` carries its cursor, so the `id:` field is not needed here.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp
from yarl import URL

from .base import Connected, Event, Transport, decode_event, iter_lines, open_response


class SSETransport(Transport):
    name = "sse"
    path = "sse"

    async def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        async with open_response(session, url, params, idle, "text/event-stream") as resp:
            yield Connected()
            parser = SSEParser()
            async for line in iter_lines(resp.content):
                if (event := parser.line(line)) is not None:
                    yield event


class SSEParser:
    """text/event-stream lines in, events out: `data:` lines up to a blank line make one event;
    `:` comments (heartbeats, padding), `id:` and other fields are skipped."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def line(self, line: bytes) -> Event | None:
        """Take one line (without its line end); the event it completes, if any."""
        if not line:
            data, self.data = self.data, []
            return decode_event(b"\n".join(data)) if data else None
        field, _, value = line.partition(b":")
        if field == b"data":
            self.data.append(value[1:] if value.startswith(b" ") else value)
        return None
