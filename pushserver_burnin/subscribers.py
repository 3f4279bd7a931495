"""One subscriber per transport, each kept alive across dropped connections.

A subscriber first fetches the channel's current cursor (a long-poll with timeout=0) and then
always resumes from the last cursor it saw, so from the moment it reports itself subscribed it
owes every message: whatever it does not receive is a loss, never a blind spot. It reports
itself subscribed once the server has taken its first held connection (a stream's 200 head, a
WebSocket's handshake, or, for long-poll, whose polls are answered only when a message comes,
the admitted cursor poll): a subscriber whose every stream is refused never counts as one.
Connecting and reconnecting is blocking socket code that gevent makes cooperative (inside Locust
and in the probe process alike); a held connection is read from the gevent hub's loop
(pushserver_burnin.readiness), so a message costs no greenlet switch.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

import orjson
from gevent.event import AsyncResult

from pushserver_burnin import readiness, websocket
from pushserver_burnin.tally import Churned
from pushserver_measure import timestamps
from pushserver_measure.http11 import (
    BodyLines,
    Connection,
    ConnectionClosed,
    Endpoint,
    HttpStatusError,
    Reader,
    Responses,
    connect,
    request_bytes,
    retry_after,
)

LONGPOLL_TIMEOUT = 30.0
_MAX_BACKOFF = 2.0
_PLAIN_CURSOR = re.compile(r"[A-Za-z0-9_.:@,-]*")
"""Cursors are channel names, epochs and ids: nothing in them needs quoting in a query."""
_DROPS = (OSError, ConnectionClosed, HttpStatusError, ValueError, KeyError, TypeError, Churned)


class Sink(Protocol):
    """Where a subscriber reports what it sees (the per-process Tally, or the probe's printer)."""

    def subscribed(self, channel: str) -> None: ...

    def delivered(
        self, envelope: dict[str, Any], received: float, size: int, dup: bool
    ) -> None: ...

    def gap(self, event: dict[str, Any]) -> None: ...

    def reconnecting(self, error: BaseException) -> None: ...


class ServerReconnect(Exception):
    """The server asked us to reconnect (graceful shutdown)."""


class Subscriber:
    """The transport-independent part: cursor, duplicate check, reconnect with backoff."""

    transport: ClassVar[str]

    def __init__(
        self,
        endpoint: Endpoint,
        channel: str,
        sink: Sink,
        source_ip: str | None = None,
        heartbeat: float = 20.0,
        stamped: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.stamped = stamped
        """Whether deliveries are timed when they arrived (the kernel's receive timestamp), not
        when read; the process must have stamping switched on (`timestamps.switch_on`)."""
        self.channel = channel
        self.sink = sink
        self.source_ip = source_ip
        self.idle_timeout = 2.5 * heartbeat
        self.cursor: str | None = None
        self.last_ids: dict[str, int] = {}
        self.received = 0  # messages and events handled, to tell progress from failure
        self.counted = False
        self.conn = Connection(endpoint, source_ip)
        self.serving: AsyncResult | None = None  # set while a held connection is read

    def drop(self) -> bool:
        """End the held connection now (--churn); it resumes from the cursor at once.
        False when there is none to drop (connecting, or between two)."""
        serving = self.serving
        if serving is None or serving.ready():
            return False
        serving.set_exception(Churned("dropped by --churn"))
        return True

    def query(self) -> str:
        return f"?cursor={quote(self.cursor, safe='')}" if self.cursor else ""

    def run(self) -> None:
        """Subscribe, then consume forever; every drop is reported and resumed from the cursor."""
        failures = 0
        while self.cursor is None:
            try:
                self.cursor = self._current_cursor()
            except _DROPS as exc:
                failures = self._backoff(exc, failures)
        self.conn.close()
        failures = 0
        while True:
            seen = self.received
            try:
                self.consume()
            except (ServerReconnect, *_DROPS) as exc:
                self.sink.reconnecting(exc)
                if self.received > seen or isinstance(exc, Churned):
                    failures = 0  # the connection was useful, or dropped on purpose
                failures = self._backoff(exc, failures)
            else:
                failures = 0

    def held(self) -> None:
        """The server took a held connection of this subscriber: it counts from now on."""
        if not self.counted:
            self.counted = True
            self.sink.subscribed(self.channel)

    def _current_cursor(self) -> str:
        head, body = self.conn.request("GET", f"/lp/{self.channel}?timeout=0")
        if head.status != 200:
            raise HttpStatusError(head.status, body, retry_after(head))
        return orjson.loads(body)["cursor"]

    def _backoff(self, error: BaseException, failures: int) -> int:
        """First retry at once (a dropped connection is routine), then exponential with jitter."""
        delay = getattr(error, "retry_after", None)
        if delay is None:
            delay = 0.0 if failures == 0 else min(_MAX_BACKOFF, 0.05 * 2**failures)
        time.sleep(delay * random.uniform(0.5, 1.0))
        return failures + 1

    def consume(self) -> None:
        """Hold one connection until it drops (raise) or ends normally (return)."""
        raise NotImplementedError

    def handle(self, item: dict[str, Any], received: float, size: int) -> None:
        self.received += 1
        kind = item.get("type")
        if "cursor" in item:
            self.cursor = item["cursor"]
        if kind is None:
            channel, msg_id = item["channel"], item["id"]
            dup = msg_id <= self.last_ids.get(channel, 0)
            if not dup:
                self.last_ids[channel] = msg_id
            self.sink.delivered(item, received, size, dup)
        elif kind == "gap":
            first, last = item["from"], item["to"]
            self.last_ids[item["channel"]] = last if last >= first else first - 1
            self.sink.gap(item)
        elif kind == "reconnect":
            raise ServerReconnect("server asked to reconnect")

    def _connect(self, timeout: float) -> Any:
        """A connection for a held request, asking for receive timestamps when `stamped`."""
        sock = connect(self.endpoint, self.source_ip, timeout)
        if self.stamped:
            try:
                timestamps.enable(sock)
            except BaseException:
                sock.close()
                raise
        return sock

    def _serve(self, sock: Any, on_data: Callable[[bytes, float], None], timeout: float) -> None:
        self.serving = AsyncResult()
        try:
            readiness.serve(sock, on_data, timeout, self.stamped, self.serving)
        finally:
            self.serving = None

    def _open_stream(self, path: str) -> tuple[Reader, Any]:
        """Connect and send a GET; the caller reads the head."""
        sock = self._connect(self.idle_timeout)
        sock.sendall(request_bytes("GET", self.endpoint.host_header, path))
        return Reader(sock), sock


class LongPollSubscriber(Subscriber):
    """Polls back to back on one keep-alive connection, every answer handled in the hub's loop:
    the next poll is sent from the callback that read the last answer. The poll request is
    built once; only the cursor is spliced in."""

    transport = "longpoll"

    def _poll_parts(self) -> tuple[bytes, bytes]:
        """The request before and after the cursor's value."""
        path = f"/lp/{self.channel}?timeout={LONGPOLL_TIMEOUT:g}&cursor="
        request = request_bytes("GET", self.endpoint.host_header, path)
        head, version, rest = request.partition(b" HTTP/1.1\r\n")
        return head, version + rest

    def consume(self) -> None:
        self.held()  # its cursor poll was admitted; a held poll says nothing before a message
        sock = self._connect(LONGPOLL_TIMEOUT + 15)
        responses = Responses()
        head, tail = self._poll_parts()

        def poll() -> bytes:
            cursor = self.cursor or ""
            value = cursor if _PLAIN_CURSOR.fullmatch(cursor) else quote(cursor, safe="")
            return head + value.encode() + tail

        try:
            sock.sendall(poll())

            def on_data(data: bytes, received: float) -> None:
                for answer in responses.feed(data):
                    if answer.status != 200:
                        raise HttpStatusError(answer.status, answer.body, answer.retry_after)
                    decoded = orjson.loads(answer.body)
                    messages = decoded["messages"]
                    size = len(answer.body) // max(1, len(messages))
                    for item in messages:
                        self.handle(item, received, size)
                    self.cursor = decoded["cursor"]
                    if not answer.keep_alive:
                        raise ConnectionClosed("the server closed the keep-alive connection")
                    readiness.send_small(sock, poll())

            self._serve(sock, on_data, LONGPOLL_TIMEOUT + 15)
        finally:
            sock.close()


class _LineStreamSubscriber(Subscriber):
    """NDJSON and SSE share the framing: a chunked response read line by line."""

    path_prefix: ClassVar[str]

    def payload(self, line: bytes) -> bytes | None:
        raise NotImplementedError

    def consume(self) -> None:
        reader, sock = self._open_stream(f"/{self.path_prefix}/{self.channel}{self.query()}")
        try:
            head = reader.read_head()
            if head.status != 200:
                raise HttpStatusError(head.status, reader.read_body(head), retry_after(head))
            self.held()
            lines = BodyLines(head.chunked)

            def on_data(data: bytes, received: float) -> None:
                for line in lines.feed(data):
                    payload = self.payload(line)
                    if payload:
                        self.handle(orjson.loads(payload), received, len(line))

            on_data(reader.take_buffered(), time.time())  # read with the head: no stamp kept
            self._serve(sock, on_data, self.idle_timeout)
        finally:
            sock.close()


class StreamSubscriber(_LineStreamSubscriber):
    transport = "stream"
    path_prefix = "stream"

    def payload(self, line: bytes) -> bytes | None:
        return line if line.strip() else None  # blank lines are heartbeats


class SseSubscriber(_LineStreamSubscriber):
    transport = "sse"
    path_prefix = "sse"

    def payload(self, line: bytes) -> bytes | None:
        # One JSON object per event on one data: line; id: repeats the envelope's cursor.
        return line[5:] if line.startswith(b"data:") else None


class WebSocketSubscriber(Subscriber):
    transport = "ws"

    def consume(self) -> None:
        path = f"/ws/{self.channel}{self.query()}"
        client = websocket.WebSocketClient(self.endpoint, path)
        sock = self._connect(self.idle_timeout)
        try:
            sock.sendall(client.to_send())

            def on_data(data: bytes, received: float) -> None:
                for message in client.feed(data):
                    self.handle(orjson.loads(message), received, len(message))
                if not self.counted and client.open:
                    self.held()
                reply = client.to_send()
                if reply:
                    readiness.send_small(sock, reply)
                client.check_open()

            self._serve(sock, on_data, self.idle_timeout)
        finally:
            sock.close()


TRANSPORTS: dict[str, type[Subscriber]] = {
    cls.transport: cls
    for cls in (LongPollSubscriber, StreamSubscriber, SseSubscriber, WebSocketSubscriber)
}
