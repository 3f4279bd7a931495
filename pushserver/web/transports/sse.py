"""`GET /sse/{channels}`: Server-Sent Events; each event's `id:` is the cursor after it, so
EventSource resumes through `Last-Event-ID` by itself."""

from __future__ import annotations

from ...wire.framing import SSE, SSE_COMPACT, SSE_COMPACT_PLAIN, SSE_PLAIN
from ..http.request import RequestHead
from .held import HeldKind, held_transport


def cursor_of(head: RequestHead) -> str:
    """Where the stream resumes. An EventSource reconnects to the URL it was opened with: its
    `Last-Event-ID` is newer than a `?cursor=` in that URL."""
    return head.headers.get("last-event-id") or head.query.get("cursor", "")


TRANSPORT = held_transport(
    "sse",
    HeldKind(
        "sse",
        "text/event-stream",
        SSE,
        SSE_PLAIN,
        cursor_of,
        (SSE_COMPACT, SSE_COMPACT_PLAIN),
    ),
)
