"""`GET /stream/{channels}`: NDJSON, one JSON object per line, held open."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...wire.framing import NDJSON, NDJSON_PLAIN
from ..front.head import RequestHead
from .held import serve_held

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol


async def handle(conn: FrontProtocol, head: RequestHead) -> None:
    await serve_held(conn, head, "stream", "application/x-ndjson", (NDJSON, NDJSON_PLAIN))
