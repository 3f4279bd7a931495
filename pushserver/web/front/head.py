"""Request heads: found with one `find`, bounded, and parsed by httptools (llhttp)."""

from __future__ import annotations

import dataclasses
from urllib.parse import unquote, unquote_plus

import httptools

HEAD_END = b"\r\n\r\n"

SINGLE = frozenset(
    (
        "host",
        "authorization",
        "content-length",
        "content-type",
        "idempotency-key",
        "last-event-id",
        "origin",
        "sec-websocket-key",
        "sec-websocket-version",
    )
)
"""Headers the server reads that hold one value: sent twice, the request is ambiguous (which
token, which key?) and refused with 400 (RFC 9110 section 5.3; for Host, RFC 9112 section 3.2)."""


class HeadError(Exception):
    """A head the front end refuses before routing it: `status` and the sentence to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(slots=True)
class RequestHead:
    method: str
    target: str
    """The request target as sent (path and query), for the access log."""
    path: str
    query: dict[str, str]
    """The first value of each query parameter, as aiohttp's `request.query.get` gives it."""
    headers: dict[str, str]
    """Lower-cased names; a repeated list header's values joined with ", " (one of `SINGLE`
    repeated is refused)."""
    version: str
    keep_alive: bool
    body_length: int
    """Content-Length, or -1 for a chunked body."""
    size: int
    """Bytes of the head, its blank line included."""


class HeadParser:
    """Parses heads one at a time with one reused llhttp parser (a new one costs more than a
    parse); replaced whenever a head leaves it expecting more than a head (a body, an
    upgrade, an error) or refusing more (not kept alive)."""

    __slots__ = (
        "complete",
        "fields",
        "keep_alive",
        "max_field",
        "max_fields",
        "max_line",
        "parser",
        "url",
    )

    def __init__(self, max_line: int, max_field: int, max_fields: int) -> None:
        self.max_line = max_line
        self.max_field = max_field
        self.max_fields = max_fields
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpRequestParser(self)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))

    def on_headers_complete(self) -> None:
        # Read here: once the message is complete, llhttp has reset what it says.
        self.keep_alive = self.parser.should_keep_alive()

    def on_message_complete(self) -> None:
        self.complete = True

    def parse(self, data: bytes) -> RequestHead:
        """Parse `data`, one whole head ending with its blank line; raises HeadError."""
        self.url, self.fields, self.complete, self.keep_alive = b"", [], False, False
        parser = self.parser
        try:
            try:
                parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                pass  # the head is complete; what follows is the upgraded protocol's
            except httptools.HttpParserError:
                raise HeadError(400, "malformed request head") from None
            return self._head(len(data))
        finally:
            if not self.complete or not self.keep_alive:
                self.parser = httptools.HttpRequestParser(self)

    def _head(self, size: int) -> RequestHead:
        parser = self.parser
        if len(self.url) > self.max_line:
            raise HeadError(414, f"request target longer than {self.max_line} bytes")
        if len(self.fields) > self.max_fields:
            raise HeadError(431, f"more than {self.max_fields} header lines")
        headers: dict[str, str] = {}
        for raw_name, raw_value in self.fields:
            if len(raw_name) + len(raw_value) > self.max_field:
                raise HeadError(431, f"request header longer than {self.max_field} bytes")
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name not in headers:
                headers[name] = value
            elif name in SINGLE:
                raise HeadError(400, f"the {name} header is sent more than once")
            else:
                headers[name] = f"{headers[name]}, {value}"
        target = self.url.decode("latin-1")
        path, _, query = target.partition("?")
        if not path.startswith("/"):
            raise HeadError(400, "request target must be a path")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body_length = -1
        else:
            body_length = int(headers.get("content-length") or 0)
        return RequestHead(
            method=parser.get_method().decode("latin-1"),
            target=target,
            path=unquote(path) if "%" in path else path,
            query=parse_query(query),
            headers=headers,
            version=parser.get_http_version(),
            keep_alive=self.keep_alive,
            body_length=body_length,
            size=size,
        )


def parse_query(query: str) -> dict[str, str]:
    """The first value of each parameter (`+` is a space, `%XX` decoded)."""
    found: dict[str, str] = {}
    if not query:
        return found
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if "%" in part or "+" in part:
            key, value = unquote_plus(key), unquote_plus(value)
        if key not in found:
            found[key] = value
    return found
