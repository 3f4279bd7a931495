"""The bare server: the least a Python server on uvloop can do for experiment 9.

It serves one thing, the bench's own requests in nchan's protocol (`targets.Target` of kind
"bare"), with nothing a real server needs: no request parser beyond finding the few header
values the bench sends, no limits, no tokens, no timeouts, history of the last `KEPT` messages
of a channel. A long-poll answer is built once per message and written to every held poll; an
SSE event the same. What it costs is what the loop, the kernel and the client cost on this
machine: experiment 9 against it (`pushserver-bench --only 9 --target bare`) gives the floor
the other servers' figures can be read against. It is a measuring reference, not a server to
deploy: a request it does not expect gets a 400 or 404 and nothing more.

    python -m pushserver_bench.bare --port 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
from collections import deque

import orjson

from pushserver.launcher import ServerProcess

KEPT = 100
"""Messages kept per channel: a long-poll behind them gets the oldest kept."""
LAST_MODIFIED = b"Thu, 01 Jan 2026 00:00:00 GMT"
"""Every answer's Last-Modified: the Etag (the message's number) alone orders them."""
COUNT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
)
CREATED = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
LARGEST_HEAD = 8192


class BadRequest(Exception):
    """A request the bare server does not serve."""


def answer(number: int, data: bytes) -> bytes:
    """Message `number`'s long-poll answer, as nchan's: the body as published, and the
    validators the next poll sends back."""
    return (
        b"HTTP/1.1 200 OK\r\nLast-Modified: %b\r\nEtag: %d\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (LAST_MODIFIED, number, len(data), data)
    )


def header(head: bytes, name: bytes) -> bytes | None:
    """The value of header `name` (lower case, with its colon) in the lower-cased `head`."""
    start = head.find(b"\r\n" + name)
    if start < 0:
        return None
    start += 2 + len(name)
    return head[start : head.find(b"\r\n", start)].strip()


class Channel:
    """The held polls and streams of one channel, and its last `KEPT` answers."""

    __slots__ = ("answers", "first", "polls", "streams")

    def __init__(self) -> None:
        self.polls: dict[Connection, None] = {}
        self.streams: dict[Connection, None] = {}
        self.answers: deque[bytes] = deque(maxlen=KEPT)
        self.first = 1
        """The number of the oldest kept answer."""

    @property
    def last(self) -> int:
        return self.first + len(self.answers) - 1

    def after(self, seen: int) -> bytes | None:
        """The answer to a poll that has had message `seen` (None: hold it)."""
        if seen >= self.last:
            return None
        return self.answers[max(0, seen + 1 - self.first)]

    def publish(self, data: bytes) -> bool:
        """Write `data` to every held poll and stream; whether anybody was there."""
        whole = answer(self.last + 1, data)
        if len(self.answers) == KEPT:
            self.first += 1  # the append drops the oldest
        self.answers.append(whole)
        polls, self.polls = self.polls, {}
        for conn in polls:
            if not conn.transport.is_closing():
                conn.transport.write(whole)
        if self.streams:
            event = b"data: %b\n\n" % data
            for conn in self.streams:
                if not conn.transport.is_closing():
                    conn.transport.write(event)
        for conn in polls:
            conn.answered()
        return bool(polls or self.streams)


CHANNELS: dict[bytes, Channel] = {}


def named(path: bytes, location: bytes) -> bytes:
    """The channel `path` names under `location` (b"" when it names none there)."""
    return path[len(location) :] if path.startswith(location) else b""


def channel(name: bytes) -> Channel:
    ch = CHANNELS.get(name)
    if ch is None:
        ch = CHANNELS[name] = Channel()
    return ch


class Connection(asyncio.Protocol):
    """One client connection: requests in order, the next one read once a held poll is
    answered."""

    def __init__(self, pub: bytes, sub: bytes) -> None:
        self.pub = pub
        self.sub = sub
        self.transport: asyncio.Transport
        self.buf = b""
        self.waiting: Channel | None = None
        """The channel whose next message this connection's poll waits for."""
        self.streaming: Channel | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.streaming is not None:
            return  # a stream's client has nothing more to ask
        self.buf += data
        if self.waiting is None:
            self._serve()
        elif len(self.buf) > LARGEST_HEAD:
            self.transport.pause_reading()  # what follows a held poll waits for its answer

    def answered(self) -> None:
        self.waiting = None
        if self.buf:
            self.transport.resume_reading()
            self._serve()

    def _serve(self) -> None:
        try:
            while self.waiting is None and self.streaming is None and self._next():
                pass
        except BadRequest:
            self.transport.write(BAD)
            self.transport.close()

    def _next(self) -> bool:
        """Serve the first whole request in the buffer; False when there is none."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > LARGEST_HEAD:
                raise BadRequest
            return False
        head = buf[: end + 2].lower()
        line = head[: head.find(b"\r\n")].split(b" ")
        if len(line) != 3:
            raise BadRequest
        method, path = line[0], line[1]
        length = header(head, b"content-length:")
        if length is not None and not length.isdigit():
            raise BadRequest
        size = int(length) if length else 0
        if len(buf) < end + 4 + size:
            return False
        body = buf[end + 4 : end + 4 + size]
        self.buf = buf[end + 4 + size :]
        # The path as sent (lower-casing is for header names only).
        self._request(method, buf[len(method) + 1 : len(method) + 1 + len(path)], head, body)
        return True

    def _request(self, method: bytes, path: bytes, head: bytes, body: bytes) -> None:
        published, subscribed = named(path, self.pub), named(path, self.sub)
        if published and method == b"post":
            self.transport.write(CREATED if channel(published).publish(body) else ACCEPTED)
        elif published and method == b"get":
            ch = channel(published)
            count = orjson.dumps({"subscribers": len(ch.polls) + len(ch.streams)})
            self.transport.write(COUNT_HEAD % len(count) + count)
        elif subscribed and method == b"get":
            self._subscribe(channel(subscribed), head)
        else:
            self.transport.write(NOT_FOUND)

    def _subscribe(self, ch: Channel, head: bytes) -> None:
        if b"text/event-stream" in (header(head, b"accept:") or b""):
            self.transport.write(STREAM_HEAD)
            self.streaming = ch
            ch.streams[self] = None
            return
        seen = header(head, b"if-none-match:")
        whole = ch.after(int(seen) if seen and seen.isdigit() else ch.last)
        if whole is None:
            self.waiting = ch
            ch.polls[self] = None
        else:
            self.transport.write(whole)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None:
            self.waiting.polls.pop(self, None)
        if self.streaming is not None:
            self.streaming.streams.pop(self, None)


class BareProcess(ServerProcess):
    """The bare server in a child process, on an ephemeral port (`with BareProcess() as srv`)."""

    name = "the bare server"
    module = "pushserver_bench.bare"
    ready = re.compile(r"bare server listening on (http://\S+)")


async def serve(host: str, port: int, pub: str, sub: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Connection(pub.encode(), sub.encode()), host, port, backlog=4096
    )
    bound = server.sockets[0].getsockname()
    print(f"bare server listening on http://{host}:{bound[1]}", flush=True)
    await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pushserver_bench.bare", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8095)
    parser.add_argument("--pub", default="/pub/", help="publisher location (default /pub/)")
    parser.add_argument("--sub", default="/sub/", help="subscriber location (default /sub/)")
    args = parser.parse_args(argv)
    import uvloop

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C on the bench reaches it too
        uvloop.run(serve(args.host, args.port, args.pub, args.sub))
    return 0


if __name__ == "__main__":
    sys.exit(main())
