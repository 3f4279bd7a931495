"""The front end: subscribe requests served by the server's own protocol, the rest by aiohttp.

The server runs in this process (on both loops it supports), started as `pushserver` starts it,
so the test can look at what aiohttp holds: nothing for a held connection (no
`RequestHandler`, no request task, nothing in the server's connection list), while the socket
keeps working. Streams get messages and heartbeats, a client leaving is noticed, and a drain
ends each body properly. Long-polls are answered and read their next request on the same
protocol. WebSockets get pongs and the close handshake, and a broken frame closes them with
1002. One keep-alive connection can alternate between aiohttp's requests and subscribe
requests, pipelined or not, and every answer comes in order.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import logging
import os
import struct

import pytest
import uvloop
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from pushserver.config import Settings
from pushserver.web.app import create_app
from pushserver.web.server import listening_socket, start_serving
from pushserver.wire.websocket import CLOSE, PING, PONG, TEXT, ws_frame

from ...inprocess import (
    DEADLINE,
    get,
    in_process,
    kept_data,
    open_stream,
    read_chunk,
    read_response,
    read_until,
    until,
)
from ...wire import masked

NOTHING = {"handlers": 0, "tasks": 0, "connections": 0}


def aiohttp_leftovers(runner: web.AppRunner) -> dict[str, int]:
    gc.collect()
    handlers = sum(isinstance(o, RequestHandler) for o in gc.get_objects())
    tasks = sum(
        getattr(t.get_coro(), "__qualname__", "")
        in ("RequestHandler.start", "RequestHandler._handle_request")
        for t in asyncio.all_tasks()
    )
    assert runner.server is not None
    return {"handlers": handlers, "tasks": tasks, "connections": len(runner.server.connections)}


async def scenario() -> None:
    async with in_process(heartbeat=0.2) as (state, runner, port):
        streams = [await open_stream(port, "/stream/ho") for _ in range(6)]
        sse = [await open_stream(port, "/sse/ho") for _ in range(3)]
        plain = [await open_stream(port, "/stream/ho", "1.0") for _ in range(3)]
        for _, _, head in streams + sse:
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"Transfer-Encoding: chunked" in head and b"Connection: close" in head
        for _, _, head in plain:
            assert head.startswith(b"HTTP/1.0 200 OK\r\n")
        await until(lambda: state.admission.total == 12, "12 held streams")
        assert aiohttp_leftovers(runner) == NOTHING

        # A pipelined request on a held stream is read and ignored; the stream goes on.
        streams[0][1].write(get("/stats"))
        # Heartbeats reach a held stream.
        await read_until(streams[1][0], b"\r\n\n\r\n")

        await state.hub.publish([("ho", b'"hello"')])
        for reader, _, _ in streams:
            chunk = await read_until(reader, b"}\n\r\n")
            assert b'"data":"hello"' in chunk and b"HTTP/" not in chunk
        for reader, _, _ in sse:
            assert b'data: {"channel":"ho"' in await read_until(reader, b"}\n\n")
        for reader, _, _ in plain:
            assert b'"data":"hello"' in await read_until(reader, b"}\n")

        # Clients leaving are noticed without aiohttp: counted and unregistered.
        for _, writer, _ in streams[3:] + sse[2:]:
            writer.close()
        await until(lambda: state.admission.total == 8, "4 disconnects")
        assert state.hub.stats.disconnects["client"] == 4
        assert len(state.hub.channels["ho"].streams) >= 1

        # Draining: each stream is told to reconnect, its body is ended, then the socket closed.
        state.hub.shutdown.drain()
        await asyncio.wait_for(state.hub.shutdown.all_gone(), DEADLINE)
        assert state.admission.total == 0
        assert state.hub.stats.disconnects["shutdown"] == 8
        for reader, _, _ in streams[:3] + sse[:2]:
            rest = await asyncio.wait_for(reader.read(), DEADLINE)
            assert b'"type":"reconnect"' in rest
            assert rest.endswith(b"\r\n0\r\n\r\n"), rest[-40:]
        for reader, _, _ in plain:
            rest = await asyncio.wait_for(reader.read(), DEADLINE)
            last = json.loads(rest.strip().splitlines()[-1])
            assert last["type"] == "reconnect"


async def answer(reader: asyncio.StreamReader, closing: bool = False) -> dict:
    """A 200's JSON body; its head says the connection closes exactly when `closing`."""
    head, body = await read_response(reader)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert (b"Connection: close" in head) == closing, head
    return json.loads(body)


async def poll_scenario() -> None:
    async with in_process() as (state, runner, port):
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
        for _, writer in conns:
            writer.write(get("/lp/hp?timeout=60"))
        await until(lambda: state.admission.total == 5, "5 held polls")
        assert aiohttp_leftovers(runner) == NOTHING

        # A request sent while the poll waits is answered after it, by aiohttp.
        conns[0][1].write(get("/healthz"))
        await state.hub.publish([("hp", b'"m1"')])
        cursors = []
        for reader, _ in conns:
            doc = await answer(reader)
            assert [m["data"] for m in doc["messages"]] == ["m1"]
            cursors.append(doc["cursor"])
        head, body = await read_response(conns[0][0])
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and body == b"ok"
        assert state.admission.total == 4  # the four others, answered, await their re-polls

        # Each connection carries the next poll: one expires empty, one is answered from the
        # history, the rest wait for the next message; aiohttp holds none of them.
        conns[1][1].write(get(f"/lp/hp?timeout=0.05&cursor={cursors[1]}"))
        doc = await answer(conns[1][0])
        assert doc == {"messages": [], "cursor": cursors[1]}
        conns[2][1].write(get("/lp/hp?history=1"))
        assert [m["data"] for m in (await answer(conns[2][0]))["messages"]] == ["m1"]
        for _, writer in conns[3:]:
            writer.write(get(f"/lp/hp?cursor={cursors[3]}"))
        # 1 expired and awaits its re-poll; 2 had another head and was answered at once.
        await until(lambda: state.admission.total == 3, "2 polls held again")
        conns[0][1].write(get(f"/lp/hp?cursor={cursors[0]}"))
        await until(lambda: state.admission.total == 4, "the poll after /healthz held")
        assert aiohttp_leftovers(runner) == NOTHING

        # A client that leaves while its poll waits is unregistered.
        conns[4][1].close()
        await until(lambda: state.admission.total == 3, "the poll to be let go")

        # Draining answers the last polls with their cursor, then closes their connections.
        state.draining = True
        state.hub.shutdown.drain()
        await asyncio.wait_for(state.hub.shutdown.all_gone(), DEADLINE)
        for i in (0, 3):
            doc = await answer(conns[i][0], closing=True)
            assert doc == {"messages": [], "cursor": cursors[i]}
            assert await asyncio.wait_for(conns[i][0].read(), DEADLINE) == b""
        for _, writer in conns[:4]:
            writer.close()


async def frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next server frame (unmasked, payloads under 64 KiB)."""
    first, length = await asyncio.wait_for(reader.readexactly(2), DEADLINE)
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    return first & 0x0F, await reader.readexactly(length)


async def open_ws(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        get(
            path,
            headers="Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
        )
    )
    head = await read_until(reader, b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 ")
    return reader, writer


async def ws_scenario() -> None:
    async with in_process() as (state, runner, port):
        conns = [await open_ws(port, "/ws/hw") for _ in range(4)]
        await until(lambda: state.admission.total == 4, "4 held websockets")
        assert aiohttp_leftovers(runner) == NOTHING

        await state.hub.publish([("hw", b'"m1"')])
        for reader, _ in conns:
            opcode, payload = await frame(reader)
            assert opcode == TEXT and json.loads(payload)["data"] == "m1"

        # Pings are answered, data frames ignored, a frame split over writes put together.
        (r0, w0), (r1, w1), (r2, w2), (r3, w3) = conns
        w0.write(masked(PING, b"hi"))
        assert await frame(r0) == (PONG, b"hi")
        ping = masked(PING, b"again")
        w1.write(masked(TEXT, b"ignored") + ping[:3])
        await asyncio.sleep(0)
        w1.write(ping[3:])
        assert await frame(r1) == (PONG, b"again")

        # The client closes: the server answers with the same code and lets go.
        w2.write(masked(CLOSE, struct.pack("!H", 1000)))
        assert await frame(r2) == (CLOSE, struct.pack("!H", 1000))
        assert await asyncio.wait_for(r2.read(), DEADLINE) == b""
        # A frame that breaks the protocol (unmasked) is closed with 1002.
        w3.write(ws_frame(TEXT, b"unmasked"))
        opcode, payload = await frame(r3)
        assert opcode == CLOSE and payload[:2] == struct.pack("!H", 1002)
        w3.write(masked(CLOSE, payload[:2]))
        assert await asyncio.wait_for(r3.read(), DEADLINE) == b""
        await until(lambda: state.admission.total == 2, "2 websockets let go")

        # Draining closes with 1012 (service restart) and waits for the client's close.
        state.hub.shutdown.drain()
        for reader, writer in conns[:2]:
            opcode, payload = await frame(reader)
            assert opcode == TEXT and json.loads(payload)["type"] == "reconnect"
            assert await frame(reader) == (CLOSE, struct.pack("!H", 1012) + b"shutdown")
            writer.write(masked(CLOSE, struct.pack("!H", 1012)))
            # The server half-closes after the handshake and lets the client close TCP.
            assert await asyncio.wait_for(reader.read(), DEADLINE) == b""
            writer.close()
        await asyncio.wait_for(state.hub.shutdown.all_gone(), DEADLINE)
        await until(
            lambda: state.hub.stats.disconnects == {"client": 2, "shutdown": 2},
            "both closes counted",
        )
        for _, writer in conns:
            writer.close()


def publish(channel: str, body: bytes, headers: str = "") -> bytes:
    return (
        f"POST /pub/{channel} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{headers}\r\n"
    ).encode() + body


async def published(reader: asyncio.StreamReader) -> int:
    head, body = await read_response(reader)
    assert head.startswith(b"HTTP/1.1 201 Created\r\n"), head
    return json.loads(body)["id"]


async def mixed_scenario() -> None:
    """aiohttp and the front end take turns on one keep-alive connection."""
    async with in_process() as (state, runner, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("mx", b'"one"'))
        assert await published(reader) == 1
        assert not runner.server.connections  # the front end published it
        writer.write(get("/healthz"))
        assert (await read_response(reader))[1] == b"ok"
        assert len(runner.server.connections) == 1  # aiohttp answered it
        writer.write(get("/lp/mx?history=1"))
        doc = await answer(reader)
        assert [m["data"] for m in doc["messages"]] == ["one"]
        assert aiohttp_leftovers(runner) == NOTHING  # its handler was torn down for the poll
        writer.write(publish("mx", b'"two"'))
        assert await published(reader) == 2
        writer.write(get(f"/stream/mx?cursor={doc['cursor']}"))
        head = await read_until(reader, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in head
        await read_chunk(reader)  # the padding line
        assert json.loads(await read_chunk(reader))["data"] == "two"
        assert aiohttp_leftovers(runner) == NOTHING

        # Pipelined in one write: answered in order, whoever answers each.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            get("/lp/pp?timeout=0")
            + publish("pp", b'"a"')
            + get("/healthz")
            + get("/lp/pp?history=5&timeout=0")
            + publish("pp", b'"b"')
            + get("/lp/pp?history=5&timeout=0&callback=cb")
        )
        assert (await answer(reader))["messages"] == []
        assert await published(reader) == 1
        assert (await read_response(reader))[1] == b"ok"
        assert [m["data"] for m in (await answer(reader))["messages"]] == ["a"]
        assert await published(reader) == 2
        head, body = await read_response(reader)
        assert b"Content-Type: application/javascript" in head
        assert body.startswith(b"cb(") and body.endswith(b");")
        assert [m["data"] for m in json.loads(body[3:-2])["messages"]] == ["a", "b"]

        # A chunked publish is decoded by the front end; the connection goes on.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /pub/ck HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Transfer-Encoding: chunked\r\n\r\n3\r\n"ch\r\n2\r\nk"\r\n0\r\n\r\n'
        )
        assert await published(reader) == 1
        writer.write(get("/healthz"))
        assert (await read_response(reader))[1] == b"ok"
        assert kept_data(state, "ck")[-1] == b'"chk"'
        writer.close()


async def refusal(reader: asyncio.StreamReader) -> tuple[bytes, dict]:
    head, body = await read_response(reader)
    return head, json.loads(body)


class AccessLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def edge_scenario() -> None:
    """What the front end answers itself besides subscriptions: refusals, HTTP/1.0, CORS,
    malformed and oversized heads, timeouts."""
    settings = {"cors_origin": "https://app.example", "request_timeout": 0.3, "access_log": True}
    logged = AccessLines()
    logging.getLogger("aiohttp.access").addHandler(logged)
    logging.getLogger("aiohttp.access").setLevel(logging.INFO)
    async with in_process(**settings) as (_, runner, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /lp/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        writer.write(get("/lp/x?timeout=0").replace(b"GET", b"HEAD"))
        head, doc = await refusal(reader)
        assert head.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, HEAD\r\n" in head
        assert doc["error"] == "method_not_allowed"
        head = await read_until(reader, b"\r\n\r\n")  # HEAD: its GET's head, no body
        assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Length" not in head
        writer.write(get("/lp/x?timeout=0", headers="Origin: https://app.example\r\n"))
        head, _ = await read_response(reader)
        assert b"Access-Control-Allow-Origin: https://app.example\r\n" in head
        # Access log lines in aiohttp's format, for the front end's answers too.
        assert any('"GET /lp/x?timeout=0 HTTP/1.1" 200' in line for line in logged.lines)
        logging.getLogger("aiohttp.access").removeHandler(logged)
        writer.write(
            b"OPTIONS /sse/x HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
            b"Access-Control-Request-Method: GET\r\n\r\n"
        )
        head = await read_until(reader, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 204 ") and b"Access-Control-Allow-Methods" in head
        writer.write(get("/lp/bad!name"))
        head, doc = await refusal(reader)
        assert head.startswith(b"HTTP/1.1 400 ") and doc["error"] == "bad_channel"
        writer.write(get("/ws/x", headers="Upgrade: websocket\r\nConnection: upgrade\r\n"))
        head, doc = await refusal(reader)
        assert head.startswith(b"HTTP/1.1 400 ") and b"Sec-WebSocket-Version: 13" in head
        # Idle past --request-timeout: closed.
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""

        # HTTP/1.0 with keep-alive stays open; without, or HTTP/1.1 with Connection: close, is
        # answered and then closed.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get("/lp/x?timeout=0", "1.0", "Connection: keep-alive\r\n"))
        head, _ = await read_response(reader)
        assert head.startswith(b"HTTP/1.0 200 OK\r\n") and b"Connection: keep-alive" in head
        writer.write(get("/lp/x?timeout=0", "1.0"))
        head, body = await read_response(reader)
        assert head.startswith(b"HTTP/1.0 200 OK\r\n") and json.loads(body)["messages"] == []
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get("/lp/x?timeout=0", "1.1", "Connection: close\r\n"))
        head, _ = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in head
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""

        # A head over the bound, and a malformed one: a JSON error, then closed.
        for request, status in (
            (get("/lp/x", headers=f"X-Big: {'y' * 17_000}\r\n"), b"431"),
            (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
            (
                get("/lp/x", headers="Authorization: Bearer a\r\nAuthorization: Bearer b\r\n"),
                b"400",
            ),
            (get("/healthz", headers="Host: y\r\n"), b"400"),  # a second Host (RFC 9112 3.2)
            (
                b"POST /pub/x HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\r\n"
                b"Idempotency-Key: b\r\nContent-Length: 2\r\n\r\n{}",
                b"400",
            ),
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            head, _ = await refusal(reader)
            assert head.startswith(b"HTTP/1.1 " + status), head
            assert await asyncio.wait_for(reader.read(), DEADLINE) == b""

        # An unfinished head is closed after --request-timeout too.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /lp/x HTTP/1.1\r\nHost:")
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""
        await until(lambda: not runner.server.connections, "aiohttp holds nothing")


async def drain_scenario() -> None:
    """The server's own shutdown: polls answered, streams told to reconnect, and idle
    connections closed, whether the front end or aiohttp answered their last request."""
    settings = Settings(port=0)
    sock = listening_socket(settings)
    serving = await start_serving(await create_app(settings), sock)
    port = sock.getsockname()[1]
    poll = await asyncio.open_connection("127.0.0.1", port)
    poll[1].write(get("/lp/dr?timeout=60"))
    stream = await open_stream(port, "/stream/dr")
    idle = await asyncio.open_connection("127.0.0.1", port)
    idle[1].write(get("/lp/dr?timeout=0"))
    await answer(idle[0])
    after_http = await asyncio.open_connection("127.0.0.1", port)
    after_http[1].write(get("/healthz"))
    assert (await read_response(after_http[0]))[1] == b"ok"
    await until(lambda: serving.state.admission.total == 2, "a poll and a stream held")
    serving.state.draining = True
    await asyncio.wait_for(serving.drain(), DEADLINE)
    assert (await answer(poll[0], closing=True))["messages"] == []
    assert b'"type":"reconnect"' in await asyncio.wait_for(stream[0].read(), DEADLINE)
    for reader, _ in (poll, idle, after_http):
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize(
    "run",
    [scenario, poll_scenario, ws_scenario, mixed_scenario, edge_scenario, drain_scenario],
    ids=["streams", "polls", "websockets", "mixed", "edges", "drain"],
)
def test_front_end(loop: str, run) -> None:
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
