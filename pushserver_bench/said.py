"""What a measured pushserver says of its own process, and which Python the bench runs on.

A server's CPU per publish and per delivery depends on the CPython build it runs on
(docs/operations.md, "Which Python to run it on"), and the bench's Python is not the server's:
each table names the bench's (`bench:`) and, when the server answers `/stats` with
`interpreter`, the server's with its allocator and build, compiled or interpreted (`server:`,
docs/operations.md "The compiled build"). nginx+nchan, the bare server and a
server that does not say are named by nothing: never guessed.
"""

from __future__ import annotations

from typing import Any

import orjson

from pushserver.monitor import interpreter
from pushserver.monitor.compiled import word
from pushserver_measure.http11 import Connection, ConnectionClosed, Endpoint


def server_said(url: str) -> dict[str, Any]:
    """`{"interpreter": {...}, "allocator": {...}, "compiled": bool}` from the `/stats` of the
    pushserver at `url`; {} when it answers no `interpreter`."""
    conn = Connection(Endpoint.parse(url), timeout=10)
    try:
        head, body = conn.request("GET", "/stats")
        stats = orjson.loads(body) if head.status == 200 else {}
    except (ConnectionClosed, OSError, orjson.JSONDecodeError):
        return {}
    finally:
        conn.close()
    if not isinstance(stats, dict) or not isinstance(stats.get("interpreter"), dict):
        return {}
    return {key: stats[key] for key in ("interpreter", "allocator", "compiled") if key in stats}


def server_line(said: dict[str, Any]) -> str:
    """`CPython 3.11.2 (/usr/bin/python3.11, libpython static), allocator pymalloc + glibc
    2.36, compiled`: a server's `server_said` in a table's header."""
    text = interpreter.summary(said["interpreter"])
    allocator = said.get("allocator")
    if isinstance(allocator, dict):
        text += f", allocator {allocator.get('python', '?')} + {allocator.get('c', '?')}"
    compiled = said.get("compiled")
    if isinstance(compiled, bool):
        text += f", {word(compiled)}"
    return text


def bench_said() -> dict[str, Any]:
    """The bench's own process, as the JSON output records it beside the servers'."""
    return {"interpreter": interpreter.describe()}


def bench_line() -> str:
    """`CPython 3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11, libpython shared)`."""
    return interpreter.summary(interpreter.describe())
