"""`GET /stream/{channels}`: NDJSON, one JSON object per line, held open."""

from __future__ import annotations

from ...wire.framing import NDJSON, NDJSON_PLAIN
from .held import HeldKind, held_transport

TRANSPORT = held_transport(
    "stream", HeldKind("stream", "application/x-ndjson", NDJSON, NDJSON_PLAIN)
)
