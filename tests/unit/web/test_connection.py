"""The front end's HTTP/1.1 connection without a socket, in the way of uvicorn's
`tests/protocols/test_http.py`: bytes go in through the asyncio adapter (`FrontProtocol`) on a
`MockTransport`, and the answers are read from what was written to it. Framing and keep-alive,
pipelining, HEAD, errors, flow control, deadlines, the hand-over to a held transport, request
bodies, aiohttp's requests and the re-poll fast path; one test drives a `Connection` alone,
under an I/O that only records what it is asked.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from pushserver.config import Settings
from pushserver.web.admission import HEAD
from pushserver.web.app import create_app
from pushserver.web.front import BUSY, IDLE
from pushserver.web.front.connection import Connection
from pushserver.web.front.protocol import RESTING, Discard, Front, FrontProtocol
from pushserver.web.http.parser import HeadParser
from pushserver.web.http.request import RequestHead
from pushserver.web.state import STATE, ServerState
from pushserver.web.transports import REGISTRY
from pushserver.web.transports.held import HeldStream
from pushserver.web.transports.longpoll import Poll
from pushserver.web.transports.ws import HeldWs
from pushserver.wire.websocket import PING, PONG

from ...inprocess import until
from ...wire import masked


class MockTransport:
    """Keeps what is written; no socket."""

    def __init__(self, peer: str = "127.0.0.1") -> None:
        self.peer = peer
        self.buffer = b""
        self.closed = False
        self.aborted = False
        self.eof = False
        self.reading = True
        self.protocol: Any = None

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": (self.peer, 5555), "sockname": ("127.0.0.1", 80)}.get(name, default)

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.buffer += data

    def writelines(self, data: list[bytes]) -> None:
        for piece in data:
            self.write(piece)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 16 << 10, 64 << 10

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def take(self) -> bytes:
        data, self.buffer = self.buffer, b""
        return data


Answer = tuple[int, dict[str, str], bytes]


def answers(data: bytes, head_only: bool = False) -> list[Answer]:
    """The answers in `data`: status, headers (names as sent), body (by its Content-Length,
    none when `head_only`)."""
    out = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        size = 0 if head_only else int(headers.get("Content-Length", 0))
        out.append((int(lines[0].split(" ")[1]), headers, data[:size]))
        data = data[size:]
    return out


def json_of(answer: Answer) -> Any:
    return orjson.loads(answer[2])


def get(target: str, *fields: str, method: str = "GET", version: str = "1.1") -> bytes:
    return "\r\n".join([f"{method} {target} HTTP/{version}", "Host: x", *fields, "", ""]).encode()


def publish(channel: str, body: bytes, *fields: str) -> bytes:
    head = get(f"/pub/{channel}", f"Content-Length: {len(body)}", *fields, method="POST")
    return head + body


class Server:
    """A server's shared state and front end, without a listening socket."""

    def __init__(self, front: Front, runner: web.AppRunner) -> None:
        self.front = front
        self.runner = runner
        self.state: ServerState = front.state

    def connect(self, peer: str = "127.0.0.1") -> tuple[FrontProtocol, MockTransport]:
        transport = MockTransport(peer)
        protocol = FrontProtocol(self.front)
        protocol.connection_made(transport)  # type: ignore[arg-type]
        return protocol, transport

    def disconnect(self) -> None:
        """Every connection still open is lost, as a socket's would be when the server stops."""
        for protocol in list(self.front.connections):
            protocol.connection_lost(None)

    async def publish(self, channel: str, data: bytes = b'"m"') -> None:
        await self.state.hub.publish([(channel, data)])


@pytest.fixture
async def server_with() -> AsyncIterator[Callable[..., Any]]:
    servers: list[Server] = []

    async def start(**settings: object) -> Server:
        app = await create_app(Settings(port=0, **settings))
        runner = web.AppRunner(app)
        await runner.setup()
        assert runner.server is not None
        servers.append(Server(Front(app[STATE], runner.server, REGISTRY), runner))
        return servers[-1]

    yield start
    for server in servers:
        server.disconnect()
        await server.runner.cleanup()


@pytest.fixture
async def server(server_with: Callable[..., Any]) -> Server:
    return await server_with()


async def test_a_poll_is_answered_and_its_connection_kept_alive(server: Server) -> None:
    protocol, transport = server.connect()
    assert server.state.admission.connections[HEAD] == 1  # a new connection awaits its head
    protocol.data_received(get("/lp/a?timeout=0"))
    [(status, headers, body)] = answers(transport.take())
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert "Connection" not in headers and orjson.loads(body)["messages"] == []
    assert protocol.conn.phase == IDLE and not transport.closed
    assert protocol.door == RESTING and server.state.admission.connections[HEAD] == 0


@pytest.mark.parametrize(
    ("version", "field", "said", "closes"),
    [
        ("1.1", None, None, False),
        ("1.1", "Connection: close", "close", True),
        ("1.0", None, None, True),
        ("1.0", "Connection: keep-alive", "keep-alive", False),
    ],
)
async def test_keep_alive_is_as_the_version_and_the_head_say(
    server: Server, version: str, field: str | None, said: str | None, closes: bool
) -> None:
    protocol, transport = server.connect()
    fields = [field] if field else []
    protocol.data_received(get("/lp/a?timeout=0", *fields, version=version))
    [(status, headers, _)] = answers(transport.take())
    assert status == 200 and headers.get("Connection") == said
    assert transport.closed == closes


async def test_pipelined_requests_are_answered_in_order_however_they_are_cut(
    server: Server,
) -> None:
    await server.publish("p", b'"zero"')
    requests = (
        get("/lp/p?timeout=0")
        + publish("p", b'"one"', "Content-Type: application/json")
        + get("/lp/p?timeout=0&history=2")
        + get("/lp/p?timeout=0&callback=cb")
    )
    for piece in (len(requests), 1, 7):
        protocol, transport = server.connect()
        for at in range(0, len(requests), piece):
            protocol.data_received(requests[at : at + piece])
        await until(lambda t=transport: len(answers(t.buffer)) == 4, "every request answered")
        got = answers(transport.take())
        assert [status for status, _, _ in got] == [200, 201, 200, 200]
        assert [m["data"] for m in json_of(got[2])["messages"]][-1] == "one"
        assert got[3][2].startswith(b"cb(") and got[3][1]["Content-Type"] == (
            "application/javascript"
        )


async def test_blank_lines_between_requests_are_skipped_and_a_connection_of_them_rests(
    server: Server,
) -> None:
    """As aiohttp does: CRLFs before a request are dropped; a connection that has sent nothing
    else since its last answer is kept alive, resting, and not counted as sending a head."""
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/a?timeout=0") + b"\r\n\r\n" + publish("a", b'"m"'))
    assert [status for status, _, _ in answers(transport.take())] == [200, 201]
    assert protocol.door == RESTING
    for blank in (b"\r\n", b"\r\n\r\n"):
        protocol.data_received(blank)
        assert protocol.door == RESTING and protocol.conn.buffer == b""
        assert server.state.admission.connections[HEAD] == 0
    protocol.data_received(b"\r")  # not a blank line yet: a head begun
    assert server.state.admission.connections[HEAD] == 1 and not transport.closed
    protocol.data_received(b"\n" + get("/lp/a?timeout=0"))
    assert [status for status, _, _ in answers(transport.take())] == [200]
    assert protocol.door == RESTING


async def test_a_head_request_gets_the_head_its_get_would_begin_with(server: Server) -> None:
    protocol, transport = server.connect()
    protocol.data_received(get("/sse/a", method="HEAD") + get("/lp/a", method="HEAD"))
    sse, poll = answers(transport.take(), head_only=True)
    assert sse[0] == poll[0] == 200 and sse[1]["Content-Type"] == "text/event-stream"
    assert "Content-Length" not in sse[1] and "Content-Length" not in poll[1]
    assert server.state.admission.total == 0  # nothing held
    protocol.data_received(get("/pub/a", method="HEAD"))
    [(status, headers, body)] = answers(transport.take(), head_only=True)
    assert (status, headers["Allow"], body) == (405, "POST", b"")
    assert int(headers["Content-Length"]) > 0  # the length of the GET's body, not sent


@pytest.mark.parametrize(
    ("request_", "status", "code"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
        (b"GET /lp/a HTTP/1.1\nHost: x\n\n", 400, "bad_request"),  # bare LFs
        (get("/lp/a", "X-Big: " + "y" * 70_000), 431, "too_large"),
        (get("/lp/a", "Content-Length: 2") + b"{}", 400, "bad_request"),
        (get("/lp/a", "Host: y"), 400, "bad_request"),  # a second Host
        (get("/lp/a", version="2.0"), 505, "bad_version"),
    ],
)
async def test_a_head_that_cannot_be_served_is_refused_and_closed(
    server: Server, request_: bytes, status: int, code: str
) -> None:
    protocol, transport = server.connect()
    protocol.data_received(request_)
    [answer] = answers(transport.take())
    assert (answer[0], json_of(answer)["error"]) == (status, code)
    assert answer[1]["Connection"] == "close" and transport.closed
    protocol.connection_lost(None)
    assert server.state.admission.connections[HEAD] == 0


@pytest.mark.parametrize(
    ("request_", "status", "header"),
    [
        (get("/lp/bad!name"), 400, None),
        (get("/lp/a", method="POST"), 405, ("Allow", "GET, HEAD")),
        (get("/pub/a"), 405, ("Allow", "POST")),
        (get("*", method="OPTIONS"), 204, ("Allow", "GET, HEAD, POST, OPTIONS")),
        (
            publish(
                "a", gzip.compress(b"{"), "Content-Encoding: gzip", "Content-Type: application/json"
            ),
            400,
            None,
        ),
    ],
)
async def test_a_refused_request_keeps_its_connection(
    server: Server, request_: bytes, status: int, header: tuple[str, str] | None
) -> None:
    protocol, transport = server.connect()
    protocol.data_received(request_ + get("/lp/a?timeout=0"))
    first, after = answers(transport.take())
    assert first[0] == status and after[0] == 200
    if header is not None:
        assert first[1][header[0]] == header[1]


async def test_a_coding_not_read_is_refused_before_its_body_and_closes(server: Server) -> None:
    protocol, transport = server.connect()
    protocol.data_received(publish("a", b"x", "Content-Encoding: br") + get("/lp/a?timeout=0"))
    [(status, headers, _)] = answers(transport.take())
    assert (status, headers["Accept-Encoding"], headers["Connection"]) == (
        415,
        "gzip, deflate",
        "close",
    )
    assert transport.eof and isinstance(transport.protocol, Discard)


async def test_a_client_not_reading_its_answers_gets_no_more_served(server: Server) -> None:
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/a?timeout=0"))
    protocol.pause_writing()
    transport.take()
    protocol.data_received(get("/lp/a?timeout=0") * 2)
    assert transport.take() == b"" and not transport.reading
    assert server.state.admission.connections[HEAD] == 1  # waiting, as an unfinished head
    protocol.resume_writing()
    assert [status for status, _, _ in answers(transport.take())] == [200, 200]
    assert transport.reading


async def test_bytes_sent_while_a_request_is_held_pause_reading_past_the_head_limit(
    server_with: Callable[..., Any],
) -> None:
    server = await server_with(max_head_bytes=4096)
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/h?timeout=30"))
    assert protocol.conn.phase == BUSY
    pipelined = get("/lp/h?timeout=0")
    sent = 0
    while sent <= 4096:
        protocol.data_received(pipelined)
        sent += len(pipelined)
        assert transport.reading == (sent <= 4096)
    await server.publish("h")
    await until(lambda: transport.reading, "reading resumed once the held poll is done with")
    assert len(answers(transport.take())) == 1 + sent // len(pipelined)


async def test_deadlines_close_an_idle_connection_and_expire_a_held_poll(server: Server) -> None:
    protocol, transport = server.connect()
    protocol.due()  # no head within --request-timeout
    assert transport.closed
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/d?timeout=30"))
    cursor = server.state.hub.channels["d"].sent_position
    protocol.due()  # the hold time is over: answered with the unchanged cursor
    await until(lambda: protocol.conn.phase == IDLE, "the expired poll done with")
    [answer] = answers(transport.take())
    assert json_of(answer) == {"messages": [], "cursor": cursor} and not transport.closed
    assert server.state.admission.total == 0


async def test_a_client_leaving_its_held_poll_gives_everything_back(server: Server) -> None:
    protocol, _ = server.connect()
    protocol.data_received(get("/lp/l?timeout=30"))
    assert server.state.admission.connections["longpoll"] == 1
    protocol.connection_lost(None)
    assert server.state.admission.total == 0 and server.state.admission.per_ip == {}
    assert "l" not in server.state.hub.channels  # never published to: gone with its poll
    assert server.front.connections == {}


async def test_a_stream_takes_the_socket_over(server: Server) -> None:
    protocol, transport = server.connect()
    protocol.data_received(get("/stream/s?pad=2") + get("/lp/s?timeout=0"))
    await until(lambda: isinstance(transport.protocol, HeldStream), "the stream held")
    head, _, first = transport.take().partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head and b"Connection: close" in head
    assert first == b"3\r\n  \n\r\n"  # the padding line, chunked
    assert isinstance(transport.protocol, HeldStream)  # the pipelined poll is not served
    assert protocol not in server.front.connections
    await server.publish("s", b'"m"')
    assert b'"data":"m"' in transport.take()
    transport.protocol.connection_lost(None)
    assert server.state.admission.total == 0


async def test_a_websocket_gets_the_bytes_sent_after_its_handshake(server: Server) -> None:
    protocol, transport = server.connect()
    key = base64.b64encode(os.urandom(16)).decode()
    fields = ["Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}"]
    handshake = get("/ws/w", *fields, "Sec-WebSocket-Version: 13")
    protocol.data_received(handshake + masked(PING, b"hi"))
    await until(lambda: isinstance(transport.protocol, HeldWs), "the handshake answered")
    head, _, frames = transport.take().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 ") and b"Sec-WebSocket-Accept: " in head
    assert frames == bytes([0x80 | PONG, 2]) + b"hi"


async def test_a_body_in_pieces_after_100_continue(server: Server) -> None:
    protocol, transport = server.connect()
    body = b'"later"'
    protocol.data_received(publish("c", body, "Expect: 100-continue")[: -len(body)])
    assert transport.take() == b"HTTP/1.1 100 Continue\r\n\r\n"
    for byte in body:
        protocol.data_received(bytes([byte]))
    await until(lambda: transport.buffer != b"", "the publish answered")
    [(status, _, answer)] = answers(transport.take())
    assert status == 201 and orjson.loads(answer)["id"] == 1


async def test_a_refusal_before_the_body_closes_after_the_answer(
    server_with: Callable[..., Any],
) -> None:
    server = await server_with(publish_key="k")
    protocol, transport = server.connect()
    protocol.data_received(publish("r", b'"unread"')[:-4])
    [(status, headers, _)] = answers(transport.take())
    assert (status, headers["Connection"]) == (401, "close")
    assert isinstance(transport.protocol, Discard) and transport.eof  # the rest read, dropped
    assert server.state.hub.channels.get("r") is None


async def test_a_request_aiohttp_answers_leaves_the_connection_to_the_next(
    server: Server,
) -> None:
    protocol, transport = server.connect()
    protocol.data_received(get("/healthz") + get("/lp/a?timeout=0"))
    await until(lambda: len(answers(transport.buffer)) == 2, "both answered")
    healthz, poll = answers(transport.take())
    assert healthz[2] == b"ok" and healthz[1]["Server"].startswith("Python/")  # aiohttp's
    assert poll[0] == 200 and not transport.closed
    assert not server.runner.server.connections  # its protocol torn down after its answer


class Parsed:
    """A head parser that notes each head it parses."""

    def __init__(self, parser: HeadParser) -> None:
        self.parser = parser
        self.heads: list[bytes] = []

    def parse(self, raw: bytes) -> RequestHead:
        self.heads.append(raw)
        return self.parser.parse(raw)


async def test_a_repoll_at_the_head_is_held_by_the_poll_it_answered_unparsed(
    server: Server,
) -> None:
    await server.publish("r")
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/r?timeout=0"))
    cursor = json_of(answers(transport.take())[0])["cursor"]
    protocol.data_received(get(f"/lp/r?timeout=30&cursor={cursor}"))
    [poll] = server.state.hub.channels["r"].waiters
    await server.publish("r", b'"two"')
    await until(lambda: protocol.conn.kept is poll, "the answered poll kept")
    parsed = Parsed(server.front.parser)
    server.front.parser = parsed  # type: ignore[assignment]
    cursor = json_of(answers(transport.take())[0])["cursor"]
    protocol.data_received(get(f"/lp/r?timeout=30&cursor={cursor}"))
    assert list(server.state.hub.channels["r"].waiters) == [poll] and parsed.heads == []
    assert isinstance(poll, Poll) and server.state.admission.connections["longpoll"] == 1


async def test_polls_asking_for_the_same_limit_share_one_bound(server: Server) -> None:
    for path in ("/lp/s?timeout=30", "/lp/s?timeout=30", "/lp/s?timeout=30&limit=2"):
        server.connect()[0].data_received(get(path))
    first, second, limited = (poll.bound for poll in server.state.hub.channels["s"].waiters)
    assert first is second and first.events == server.state.settings.longpoll_max_messages
    assert limited.events == 2 and limited.bytes == first.bytes


async def test_a_repoll_behind_the_head_is_answered_at_once(server: Server) -> None:
    await server.publish("b")
    protocol, transport = server.connect()
    protocol.data_received(get("/lp/b?timeout=0"))
    behind = json_of(answers(transport.take())[0])["cursor"]
    protocol.data_received(get(f"/lp/b?timeout=30&cursor={behind}"))
    await server.publish("b", b'"one"')
    await until(lambda: protocol.conn.kept is not None, "the answered poll kept")
    await server.publish("b", b'"two"')  # nobody held: the kept poll is now behind
    transport.take()
    protocol.data_received(get(f"/lp/b?timeout=30&cursor={behind}") * 3)
    got = answers(transport.take())
    assert [[m["data"] for m in json_of(a)["messages"]] for a in got] == [["one", "two"]] * 3


class Io:
    """What a connection asks of the I/O beneath it, recorded; no socket, no adapter."""

    def __init__(self, transport: MockTransport) -> None:
        self.peer = "10.0.0.1"
        self.transport = transport
        self.reserved = False
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args: self.asked.append(name)


async def test_a_connection_alone_asks_its_io_what_it_needs(server: Server) -> None:
    transport = MockTransport()
    io = Io(transport)
    conn = Connection(server.front, io, transport)  # type: ignore[arg-type]
    conn.receive(get("/lp/x?timeout=0")[:10])
    conn.receive(get("/lp/x?timeout=0")[10:] + b"GET /lp/x?time")
    assert answers(transport.take().partition(b"\r\n\r\n")[0] + b"\r\n\r\n", True)[0][0] == 200
    assert io.asked == ["waiting", "serving", "wait", "waiting"]
    conn.due()  # the rest of the head never came
    assert io.asked[-1] == "close"
