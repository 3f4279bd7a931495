"""`GET /sse/{channels}`: Server-Sent Events; each event's `id:` is the cursor after it, so
EventSource resumes through `Last-Event-ID` by itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...wire.framing import SSE, SSE_PLAIN
from ..front.head import RequestHead
from .held import serve_held

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol


def cursor_of(head: RequestHead) -> str:
    """Where the stream resumes. An EventSource reconnects to the URL it was opened with: its
    `Last-Event-ID` is newer than a `?cursor=` in that URL."""
    return head.headers.get("last-event-id") or head.query.get("cursor", "")


async def handle(conn: FrontProtocol, head: RequestHead) -> None:
    await serve_held(conn, head, "sse", "text/event-stream", (SSE, SSE_PLAIN), cursor_of(head))
