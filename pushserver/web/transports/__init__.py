"""Subscribe transports, one module each: long-poll, NDJSON stream, SSE, WebSocket."""
