"""Sans-I/O framing: the bytes each transport puts on the wire (NDJSON lines, SSE events,
WebSocket frames, the chunked transfer coding of a held HTTP/1.1 body, the long-poll body),
built once and written to every subscriber alike. No I/O, and no more of HTTP than that: heads,
status lines, request bodies and connections are the web layer's."""
