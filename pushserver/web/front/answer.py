"""Answers the front end writes itself: status line and headers, JSON errors, and the prebuilt
long-poll answer the fan-out writes to every plain waiter."""

from __future__ import annotations

import time
from collections.abc import Iterable
from email.utils import formatdate
from http import HTTPStatus

from ... import __version__
from ...core.errors import PushError
from ..errors import error_body, refusal_headers, status_of

SERVER = f"pushserver/{__version__}"
NO_CACHE = ("Cache-Control", "no-cache, no-store")
JSON = ("Content-Type", "application/json")
_date = ["", 0]


def http_date() -> str:
    """The `Date` value, formatted once per second."""
    now = int(time.time())
    if _date[1] != now:
        _date[0], _date[1] = formatdate(now, usegmt=True), now
    return _date[0]  # type: ignore[return-value]


def head(
    status: int,
    headers: Iterable[tuple[str, str]],
    version: str = "1.1",
    keep_alive: bool = True,
    length: int | None = None,
    chunked: bool = False,
) -> bytes:
    """A response head as aiohttp would write it: `Content-Length` when `length` is known,
    chunked transfer on HTTP/1.1 when asked, and `Connection` only where the version's default
    does not already say what happens next."""
    lines = [f"HTTP/{version} {status} {HTTPStatus(status).phrase}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    if length is not None:
        lines.append(f"Content-Length: {length}")
    elif chunked and version == "1.1":
        lines.append("Transfer-Encoding: chunked")
    lines.append(f"Date: {http_date()}")
    lines.append(f"Server: {SERVER}")
    if keep_alive and version == "1.0":
        lines.append("Connection: keep-alive")
    elif not keep_alive and version == "1.1":
        lines.append("Connection: close")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


_PLAIN = (
    "HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-store\r\nContent-Type: application/json\r\n"
    "Content-Length: %d\r\nDate: %s\r\nServer: " + SERVER + "\r\n\r\n"
)


def json_answer(body: bytes) -> bytes:
    """The whole `200 application/json` HTTP/1.1 keep-alive answer carrying `body` (what
    `head` gives for it, built faster: the fan-out builds one per distinct body)."""
    return (_PLAIN % (len(body), http_date())).encode() + body


def refusal(exc: PushError) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of the JSON error for `exc`."""
    headers = [JSON, *refusal_headers(exc).items()]
    return status_of(exc), headers, error_body(exc.code, exc.message)
