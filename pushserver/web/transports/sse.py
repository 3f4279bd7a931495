"""`GET /sse/{channels}`: Server-Sent Events; each event's `id:` is the cursor after it, so
EventSource resumes through `Last-Event-ID` by itself."""

from __future__ import annotations

from aiohttp import web

from ...wire.framing import SSE, SSE_PLAIN
from .held import serve_held


async def handle(request: web.Request) -> web.StreamResponse:
    cursor = request.query.get("cursor") or request.headers.get("Last-Event-ID", "")
    return await serve_held(request, "sse", "text/event-stream", (SSE, SSE_PLAIN), cursor)
