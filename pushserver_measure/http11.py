"""A tiny HTTP/1.1 client: request bytes and response heads for any socket API, and a blocking
reader and keep-alive connection on plain sockets.

Locust's FastHttpUser loses keep-alive above about 1,000 users per process (geventhttpclient
checks pooled sockets with select(), which fails for descriptors >= 1024) and reads streams in
blocks that hold lines back. Subscribers therefore speak HTTP themselves: a status line, headers,
chunked or Content-Length bodies, nothing more. Under Locust the socket module is gevent's, so
every call here yields instead of blocking; in the probe process it is the standard one.
"""

from __future__ import annotations

import socket
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import urlsplit

import httptools

IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
_RECV_SIZE = 65536


class ConnectionClosed(Exception):
    """The peer closed the connection (or sent something that is not HTTP)."""


class HttpStatusError(Exception):
    """The server answered with a status the caller did not expect."""

    def __init__(self, status: int, body: bytes, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


@dataclass(frozen=True)
class Endpoint:
    """Where the server listens, parsed once from the --host URL."""

    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http":
            raise ValueError(f"only http:// URLs are supported, got {url!r}")
        return cls(parts.hostname or "127.0.0.1", parts.port or 80)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


HEAD_END = b"\r\n\r\n"


@dataclass
class Head:
    status: int
    headers: dict[str, str]

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None else None

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


def parse_head(raw: bytes) -> Head:
    """A response's status line and headers (names lower-cased), with or without the blank line."""
    status_line, *header_lines = raw.decode("latin-1").rstrip("\r\n").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ConnectionClosed(f"not an HTTP response: {status_line!r}")
    headers = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return Head(int(parts[1]), headers)


def connect(
    endpoint: Endpoint, source_ip: str | None = None, timeout: float | None = None
) -> socket.socket:
    """Open a TCP connection, optionally from a chosen local address.

    Binding with IP_BIND_ADDRESS_NO_PORT lets the kernel pick the port at connect() time, so
    each (source, destination) pair has its own ~28,000 ephemeral ports.
    """
    family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if source_ip:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source_ip, 0))
        sock.settimeout(timeout)
        sock.connect((endpoint.host, endpoint.port))
    except BaseException:
        sock.close()
        raise
    return sock


def request_bytes(
    method: str,
    host: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> bytes:
    """One request, ready to send; `host` is the Host header's value."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Reader:
    """Buffered reads from one socket: heads, whole bodies, and bodies piece by piece."""

    __slots__ = ("buf", "received", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.received = 0  # bytes read so far

    def _fill(self) -> None:
        data = self.sock.recv(_RECV_SIZE)
        if not data:
            raise ConnectionClosed("connection closed by the server")
        self.received += len(data)
        self.buf += data

    def read_until(self, separator: bytes) -> bytes:
        start = 0
        while True:
            at = self.buf.find(separator, start)
            if at >= 0:
                end = at + len(separator)
                out = bytes(self.buf[:end])
                del self.buf[:end]
                return out
            start = max(0, len(self.buf) - len(separator) + 1)
            self._fill()

    def read_exact(self, size: int) -> bytes:
        while len(self.buf) < size:
            self._fill()
        out = bytes(self.buf[:size])
        del self.buf[:size]
        return out

    def read_some(self) -> bytes:
        if not self.buf:
            self._fill()
        return self.take_buffered()

    def take_buffered(self) -> bytes:
        """What was read past the last parsed item, for a parser that takes over the socket."""
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_head(self) -> Head:
        return parse_head(self.read_until(HEAD_END))

    def iter_body(self, head: Head) -> Iterator[bytes]:
        """Yield the body as it arrives: one piece per chunk, or per read without chunking."""
        if head.chunked:
            while True:
                size = int(self.read_until(b"\r\n").split(b";", 1)[0], 16)
                if size == 0:
                    self.read_until(b"\r\n")  # no trailers are used
                    return
                piece = self.read_exact(size)
                self.read_exact(2)
                yield piece
        elif head.content_length is not None:
            left = head.content_length
            while left > 0:
                piece = self.read_some()
                if len(piece) > left:  # pipelining is never used; keep the excess anyway
                    self.buf[:0] = piece[left:]
                    piece = piece[:left]
                left -= len(piece)
                yield piece
        else:
            while True:
                try:
                    yield self.read_some()
                except ConnectionClosed:
                    return

    def read_body(self, head: Head) -> bytes:
        return b"".join(self.iter_body(head))


def retry_after(head: Head) -> float | None:
    try:
        return float(head.headers["retry-after"])
    except (KeyError, ValueError):
        return None


class Connection:
    """One keep-alive connection for request/response use (long-poll, publishing, /stats)."""

    def __init__(
        self, endpoint: Endpoint, source_ip: str | None = None, timeout: float | None = 30.0
    ) -> None:
        self.endpoint = endpoint
        self.source_ip = source_ip
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.reader: Reader | None = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[Head, bytes]:
        """Send one request and read the whole answer.

        A reused socket that the server had closed while idle (no answer byte at all) is
        replaced once; a connection that dies during an answer is the caller's to handle.
        """
        data = request_bytes(method, self.endpoint.host_header, path, body, headers)
        for attempt in (0, 1):
            fresh = self.sock is None
            if fresh:
                self.sock = connect(self.endpoint, self.source_ip, self.timeout)
                self.reader = Reader(self.sock)
            assert self.sock is not None and self.reader is not None
            self.sock.settimeout(timeout if timeout is not None else self.timeout)
            before = self.reader.received
            try:
                self.sock.sendall(data)
                head = self.reader.read_head()
                payload = self.reader.read_body(head)
            except (ConnectionClosed, OSError):
                answered = self.reader.received > before
                self.close()
                if fresh or attempt or answered:
                    raise
                continue
            if not head.keep_alive:
                self.close()
            return head, payload
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.reader = None


class BodyLines:
    """Incremental decoder: body bytes as they arrive (chunked or not) → complete lines.

    Everything a read brought is decoded at once, so a burst of messages costs one call.
    """

    __slots__ = ("_buf", "_chunked", "_left", "_pending", "_skip")

    def __init__(self, chunked: bool) -> None:
        self._chunked = chunked
        self._buf = b""  # undecoded framing (a chunk-size line cut in two)
        self._left = 0  # chunk data bytes still to come
        self._skip = 0  # CRLF bytes after chunk data still to drop
        self._pending = b""  # the start of a line whose newline has not arrived

    def feed(self, data: bytes) -> list[bytes]:
        """The lines (without newline) completed by `data`; ConnectionClosed at the body's end."""
        body = self._unchunk(data) if self._chunked else data
        lines = (self._pending + body).split(b"\n")
        self._pending = lines.pop()
        return lines

    def _unchunk(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        pos, end, pieces = 0, len(buf), []
        while pos < end:
            if self._left:
                stop = min(end, pos + self._left)
                pieces.append(buf[pos:stop])
                self._left -= stop - pos
                pos = stop
                if not self._left:
                    self._skip = 2
            elif self._skip:
                step = min(self._skip, end - pos)
                self._skip -= step
                pos += step
            else:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                if size == 0:
                    raise ConnectionClosed("stream ended")
                self._left, pos = size, eol + 2
        self._buf = buf[pos:]
        return b"".join(pieces)


NO_HEADERS: Mapping[bytes, bytes] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Answer:
    """One whole answer on a keep-alive connection."""

    status: int
    body: bytes
    keep_alive: bool
    retry_after: float | None
    headers: Mapping[bytes, bytes] = field(default_factory=lambda: NO_HEADERS)
    """The headers the decoder was asked to keep (`Responses(keep=...)`), names lower-cased."""


class _Framing:
    """The callbacks of a `Responses` that reads no header: httptools calls into Python only
    for the callbacks its target has, so none is made per header."""

    __slots__ = ("on_body", "on_message_complete")

    def __init__(self, responses: Responses) -> None:
        self.on_body = responses.on_body
        self.on_message_complete = responses.on_message_complete


class Responses:
    """Incremental decoder for answers on a keep-alive connection: bytes → Answers.

    httptools' response parser does the framing in C; the only headers read in Python are
    Retry-After (unless `retry_after` is False) and those named in `keep`, so an answer costs a
    few calls whatever its head holds, and none per header when neither is read (half the
    cost of a long-poll answer's framing).
    """

    __slots__ = ("_answers", "_body", "_headers", "_keep", "_parser", "_retry", "_retry_after")

    def __init__(self, keep: Collection[bytes] = (), retry_after: bool = True) -> None:
        self._retry_after = retry_after
        headers = retry_after or bool(keep)
        self._parser = httptools.HttpResponseParser(self if headers else _Framing(self))
        self._body: list[bytes] = []
        self._retry: float | None = None
        self._keep = frozenset(name.lower() for name in keep)
        self._headers: dict[bytes, bytes] = {}
        self._answers: list[Answer] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and self._retry_after and name.lower() == b"retry-after":
            try:
                self._retry = float(value)
            except ValueError:
                self._retry = None
        elif self._keep and (lower := name.lower()) in self._keep:
            self._headers[lower] = value

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        headers = self._headers
        if headers:
            self._headers = {}
        answer = Answer(
            parser.get_status_code(),
            body,
            parser.should_keep_alive(),
            self._retry,
            headers or NO_HEADERS,
        )
        self._answers.append(answer)
        self._body, self._retry = [], None

    def feed(self, data: bytes) -> list[Answer]:
        """The answers `data` completed; ConnectionClosed for anything that is not HTTP."""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise ConnectionClosed(f"not an HTTP answer: {exc}") from exc
        answers, self._answers = self._answers, []
        return answers
