"""A test server that answers one step at a time, for tests of real decoders and clients.

Each held request is handed to the test, which writes its answer in steps (the head, then
blocks of a compressed stream, ...) and waits for the client to report what a step carried
before it writes the next. A decoder that held a message back for bytes still to come would
never get them, and the test fails at its deadline; nothing is timed. Requests for paths in
`pages` are answered at once (a page for a browser, a JSON answer); only requests for a path
under one of `held` go to the test, any other is answered 404 (a browser's favicon).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import h11

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LAST_CHUNK = b"0\r\n\r\n"


@dataclass
class Held:
    """One request the test answers step by step."""

    method: str
    target: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header's values joined with ", "."""
    sock: socket.socket
    leftover: bytes = b""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.target).query).items()}

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def head(self, status: str, headers: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def websocket_accept(self, extensions: str | None) -> None:
        """Answer the upgrade (101), with `extensions` as `Sec-WebSocket-Extensions`."""
        digest = hashlib.sha1(self.headers["sec-websocket-key"].encode() + WS_GUID).digest()
        headers = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", base64.b64encode(digest).decode()),
        ]
        if extensions:
            headers.append(("Sec-WebSocket-Extensions", extensions))
        self.send(self.head("101 Switching Protocols", headers))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def abort(self) -> None:
        """Drop the connection with a reset, as a lost link does."""
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
        self.sock.close()


@dataclass
class Lockstep:
    pages: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """path -> (content type, body), answered at once."""
    held: tuple[str, ...] = ("/sse/", "/stream/", "/lp/", "/ws/")
    requests: queue.Queue[Held] = field(default_factory=queue.Queue)
    _listener: socket.socket = field(init=False)
    _threads: list[threading.Thread] = field(default_factory=list)
    _socks: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def next(self, timeout: float = 30) -> Held:
        """The next request under one of the `held` paths."""
        return self.requests.get(timeout=timeout)

    def close(self) -> None:
        self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> Lockstep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        """Read requests (h11 parses them); pages are answered, the first other request is
        handed to the test with the connection."""
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                conn.receive_data(data)
                if not data:
                    return
                continue
            if isinstance(event, h11.Request):
                target = event.target.decode()
                headers: dict[str, str] = {}
                for name, value in event.headers:
                    key = name.decode().lower()
                    headers[key] = (
                        f"{headers[key]}, {value.decode()}" if key in headers else value.decode()
                    )
                path = urlsplit(target).path
                if path.startswith(self.held):
                    leftover, _ = conn.trailing_data
                    self.requests.put(Held(event.method.decode(), target, headers, sock, leftover))
                    return
                content_type, body = self.pages.get(path, ("text/plain", b"not found"))
                answer = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
                status = 200 if path in self.pages else 404
                sock.sendall(
                    conn.send(h11.Response(status_code=status, headers=answer))
                    + conn.send(h11.Data(data=body))
                    + conn.send(h11.EndOfMessage())
                )
            elif isinstance(event, h11.EndOfMessage):
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    """Poll `check` until it holds; fail, saying `what`, at the deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)  # polling with a deadline, not waiting blind


class Lines:
    """A subprocess's stdout, read as lines by a thread as they come."""

    def __init__(self, stream: Iterator[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Iterator[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))
