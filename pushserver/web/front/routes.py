"""Where each request goes: the one table of what the front end serves itself.

- `/{segment}/{channels}` of a registered transport (`web/transports/REGISTRY`): `GET` to its
  handler, `HEAD` to its checks (`transports/probe.py`), a CORS preflight answered, any other
  method 405. None of them has a body.
- `/pub` and `/pub/{channel}`: `POST` to the publish handler (`publish.py`), a CORS preflight
  answered, any other method 405.
- `OPTIONS *`: the methods the server supports.
- anything else: aiohttp (`forward.py`), where the operator routes and users' own live.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from ..cors import ALLOW_HEADERS, ALLOW_METHODS, MAX_AGE
from ..errors import error_body
from ..http import answer
from ..http.parser import ASTERISK
from ..http.request import RequestHead
from ..transports import probe
from . import forward, publish

if TYPE_CHECKING:
    from ..transports.exchange import Exchange, Transport
    from .base import Serve
    from .connection import Connection

SERVER_ALLOW: Final = ("Allow", "GET, HEAD, POST, OPTIONS")
"""What `OPTIONS *` answers: every method some resource of this server serves."""
NO_BODY: Final = "a subscribe request has no body"
ROUTES: Final = ("/pub", "/pub/{channel}")
"""The publish paths (aiohttp has no route for them); each transport adds its own."""

Route = tuple["Serve", str | None]
"""A request's handler, and when the request may have no body, the refusal of one that has."""


class Routes:
    """The front end's routes, built once per server."""

    __slots__ = ("publish_other", "subscribe_other", "transports")

    def __init__(self, transports: Iterable[Transport]) -> None:
        self.transports: dict[str, tuple[Serve, Serve]] = {
            t.segment: (t.serve, functools.partial(probe.handle, check=t.probe)) for t in transports
        }
        """Each transport's `GET` and `HEAD` handlers, by path segment."""
        self.subscribe_other = functools.partial(other, allow="GET, HEAD")
        self.publish_other = functools.partial(other, allow="POST")

    def route(self, head: RequestHead) -> Route:
        path, method = head.path, head.method
        slash = path.find("/", 1)
        handlers = None if slash < 0 else self.transports.get(path[1:slash])
        if handlers is not None:
            if method == "GET":
                return handlers[0], NO_BODY
            if method == "HEAD":
                return handlers[1], NO_BODY
            return self.subscribe_other, NO_BODY
        if path == publish.BATCH or (path.startswith(publish.ONE) and slash == 4):
            if method == "POST":
                return publish.handle, None
            if path == publish.BATCH or "/" not in path[len(publish.ONE) :]:
                return self.publish_other, None
        if path == ASTERISK:
            return options_server, "OPTIONS * has no body"
        return forward.serve, None


def other(conn: Connection, head: RequestHead, allow: str) -> None:
    """A method a native path does not serve: a CORS preflight is answered (with what it may
    do when its origin is allowed), anything else is 405 naming the methods `allow`ed. A body
    sent with it is not read: the answer closes the connection."""
    cors = conn.front.cors
    if head.method == "OPTIONS" and cors and "access-control-request-method" in head.headers:
        headers = []
        if cors.headers(head.headers.get("origin")):
            headers = [
                ("Access-Control-Allow-Methods", ALLOW_METHODS),
                ("Access-Control-Allow-Headers", ALLOW_HEADERS),
                ("Access-Control-Max-Age", MAX_AGE),
            ]
        status, body = 204, b""
    else:
        headers = [answer.JSON, ("Allow", allow)]
        status, body = 405, error_body("method_not_allowed", "Method Not Allowed")
    if head.body_length:
        conn.refuse_unread(head, status, headers, body)
    else:
        conn.reply(head, status, headers, body)


def options_server(conn: Exchange, head: RequestHead) -> None:
    """`OPTIONS *` (the one request the parser lets name no path): the methods the server
    supports (RFC 9110 section 9.3.7)."""
    conn.reply(head, 204, [SERVER_ALLOW], b"")
