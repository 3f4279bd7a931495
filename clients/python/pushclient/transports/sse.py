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
            data: list[bytes] = []
            async for line in iter_lines(resp.content):
                if not line:
                    if data and (event := decode_event(b"\n".join(data))) is not None:
                        yield event
                    data.clear()
                    continue
                field, _, value = line.partition(b":")
                if field == b"data":
                    data.append(value[1:] if value.startswith(b" ") else value)
