"""`GET /stream/{channels}`: NDJSON, one JSON object per line, held open."""

from __future__ import annotations

from aiohttp import web

from ...wire.framing import NDJSON, NDJSON_PLAIN
from .held import serve_held


async def handle(request: web.Request) -> web.StreamResponse:
    return await serve_held(request, "stream", "application/x-ndjson", (NDJSON, NDJSON_PLAIN))
