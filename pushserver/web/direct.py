"""Long-poll answers written straight to the socket by the fan-out.

Answering 10,000 held polls through aiohttp's response machinery costs a task switch, a
Response and a header build per poll before the last client hears anything. For a plain
HTTP/1.1 keep-alive poll the fan-out writes the whole answer itself (the same bytes for every
one-channel waiter, built once); the handler then returns `SentResponse`, which writes nothing
and keeps the connection alive for the client's next request (a poll handed off while it waited
has its connection given back instead: see `transports.longpoll.DirectPoll`).

The bytes are those aiohttp would send for the same answer. Anything that would change them
(response-prepare hooks such as CORS, JSONP, HTTP/1.0, `Connection: close`) takes the ordinary
path; a middleware that edits responses after the handler must not be added without the same
check.
"""

from __future__ import annotations

import time
from email.utils import formatdate

from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE, HttpVersion11

_HEAD = (
    "HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-store\r\nContent-Type: application/json\r\n"
    "Content-Length: %d\r\nDate: %s\r\nServer: " + SERVER_SOFTWARE + "\r\n\r\n"
)
_date = ["", 0]


def _http_date() -> str:
    now = int(time.time())
    if _date[1] != now:
        _date[0], _date[1] = formatdate(now, usegmt=True), now
    return _date[0]  # type: ignore[return-value]


def json_answer(body: bytes) -> bytes:
    """The complete `200 application/json` HTTP/1.1 response carrying `body`."""
    return (_HEAD % (len(body), _http_date())).encode() + body


def answers_directly(request: web.Request) -> bool:
    """Whether a long-poll may be answered with `json_answer` bytes written to its socket."""
    return (
        request.version == HttpVersion11
        and request.keep_alive
        and not request.body_exists
        and not request.app.on_response_prepare
        and "callback" not in request.query
    )


class SentResponse(web.StreamResponse):
    """What a handler returns when its answer went out another way: nothing for aiohttp to
    send (a long-poll the fan-out answered, a connection handed off by `handoff`). `status` is
    what went out, for the access log."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(status=status)
        self._keep_alive = True

    async def prepare(self, request: web.BaseRequest) -> None:
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None
