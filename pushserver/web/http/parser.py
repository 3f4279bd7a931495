"""Request heads: found with one `find`, bounded, and parsed by httptools (llhttp)."""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

import httptools

from .request import RequestHead

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


VERSIONS = frozenset(("1.0", "1.1"))
"""The HTTP versions served; any other is refused with 505 (RFC 9110 section 15.6.6)."""

HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(:[0-9]*)?")
"""A `Host` value (RFC 9110 section 7.2: uri-host [":" port]); empty is allowed."""

ABSOLUTE = re.compile(r"https?://[^/?]*", re.IGNORECASE)
"""The scheme and authority of an absolute-form target (RFC 9112 section 3.2.2), which a server
must accept; what follows them is the path and query."""


ASTERISK = "*"
"""The path of `OPTIONS *`, the one request for no resource."""


class HeadError(Exception):
    """A head the front end refuses before routing it: `status`, the error code and the
    sentence to send."""

    def __init__(self, status: int, message: str, code: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


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
            raise HeadError(414, f"request target longer than {self.max_line} bytes", "too_large")
        if len(self.fields) > self.max_fields:
            raise HeadError(431, f"more than {self.max_fields} header lines", "too_large")
        headers: dict[str, str] = {}
        for raw_name, raw_value in self.fields:
            if len(raw_name) + len(raw_value) > self.max_field:
                message = f"request header longer than {self.max_field} bytes"
                raise HeadError(431, message, "too_large")
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name not in headers:
                headers[name] = value
            elif name in SINGLE:
                raise HeadError(400, f"the {name} header is sent more than once")
            else:
                headers[name] = f"{headers[name]}, {value}"
        version = parser.get_http_version()
        if version not in VERSIONS:
            raise HeadError(505, "this server speaks HTTP/1.1 and HTTP/1.0", "bad_version")
        _check_expect(headers.get("expect"))
        body_length = _body_length(headers)
        target = self.url.decode("latin-1")
        method = parser.get_method().decode("latin-1")
        path, _, query = _origin_form(target, method).partition("?")
        _check_host(headers.get("host"), version)
        return RequestHead(
            method=method,
            target=target,
            path=unquote(path) if "%" in path else path,
            query=parse_query(query),
            headers=headers,
            version=version,
            keep_alive=self.keep_alive,
            body_length=body_length,
            size=size,
        )


def _origin_form(target: str, method: str) -> str:
    """The path and query of a request target (origin-form or absolute-form), or `*` for
    `OPTIONS *` (asterisk-form, RFC 9112 section 3.2.4: the server as a whole)."""
    if target.startswith("/"):
        return target
    if target == ASTERISK and method == "OPTIONS":
        return ASTERISK
    authority = ABSOLUTE.match(target)
    if authority is None:
        raise HeadError(400, "request target must be a path, an http(s) URL or * (OPTIONS only)")
    rest = target[authority.end() :]
    return rest if rest.startswith("/") else "/" + rest


def _check_host(host: str | None, version: str) -> None:
    """RFC 9112 section 3.2: an HTTP/1.1 request without Host, or with an invalid one, is 400."""
    if host is None:
        if version == "1.1":
            raise HeadError(400, "an HTTP/1.1 request needs a Host header")
    elif not HOST.fullmatch(host):
        raise HeadError(400, f"the Host header {host[:100]!r} is not a host[:port]")


def _check_expect(expect: str | None) -> None:
    """417 for an expectation other than 100-continue (RFC 9110 section 10.1.1), whichever
    route the request is for."""
    if expect is not None and expect.strip().lower() != "100-continue":
        raise HeadError(417, f"Expect {expect[:100]!r} is not supported", "bad_expect")


def _body_length(headers: dict[str, str]) -> int:
    """Content-Length, or -1 for a chunked body; 501 for another transfer coding (RFC 9112
    section 6.1), whichever route the request is for."""
    transfer = headers.get("transfer-encoding")
    if transfer is None:
        return int(headers.get("content-length") or 0)
    if transfer.strip().lower() != "chunked":
        message = f"transfer coding {transfer[:100]!r} is not supported (only chunked)"
        raise HeadError(501, message, "not_implemented")
    return -1


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
