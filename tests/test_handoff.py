"""Held connections are handed off from aiohttp while they wait.

The server runs in this process (on both loops it supports) so the test can look at what aiohttp
still holds: nothing of a handed-off connection may remain (no `RequestHandler`, no request
task, nothing in the server's connection list), while the socket keeps working. Streams get
messages and heartbeats, a client leaving is noticed, and a drain ends each body properly.
Long-polls (handed off once they have waited `HAND_OFF_AFTER`) get their answer and their
connection back in aiohttp's hands for the next request.
WebSockets get pongs and the close handshake, and a broken frame closes them with 1002.
"""

from __future__ import annotations

import asyncio
import gc
import json
import struct

import pytest
import uvloop
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from pushserver.web.transports import longpoll
from pushserver.wire.websocket import CLOSE, PING, PONG, TEXT, ws_frame

from .inprocess import DEADLINE, get, in_process, open_stream, read_response, read_until, until
from .wire import masked, open_ws, read_frame

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
        await until(lambda: state.hub.connection_total == 12, "12 held streams")
        # The last hand-off's tasks finish and aiohttp forgets it within a few loop turns.
        await until(lambda: aiohttp_leftovers(runner) == NOTHING, "aiohttp to let go")

        # A pipelined request on a held stream is read and ignored; the stream goes on.
        streams[0][1].write(get("/stats"))
        # Heartbeats still reach a handed-off stream.
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
        await until(lambda: state.hub.connection_total == 8, "4 disconnects")
        assert state.hub.stats.disconnects["client"] == 4
        assert len(state.hub.channels["ho"].streams) >= 1

        # Draining: each stream is told to reconnect, its body is ended, then the socket closed.
        state.hub.drain()
        await asyncio.wait_for(state.hub.all_gone(), DEADLINE)
        assert state.hub.connection_total == 0
        assert state.hub.stats.disconnects["shutdown"] == 8
        for reader, _, _ in streams[:3] + sse[:2]:
            rest = await asyncio.wait_for(reader.read(), DEADLINE)
            assert b'"type":"reconnect"' in rest
            assert rest.endswith(b"\r\n0\r\n\r\n"), rest[-40:]
        for reader, _, _ in plain:
            rest = await asyncio.wait_for(reader.read(), DEADLINE)
            last = json.loads(rest.strip().splitlines()[-1])
            assert last["type"] == "reconnect"


async def answer(reader: asyncio.StreamReader) -> dict:
    head, body = await read_response(reader)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" not in head
    return json.loads(body)


async def poll_scenario() -> None:
    async with in_process() as (state, runner, port):
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
        for _, writer in conns:
            writer.write(get("/lp/hp?timeout=60"))
        await until(lambda: state.hub.connection_total == 5, "5 held polls")
        await until(lambda: aiohttp_leftovers(runner) == NOTHING, "aiohttp to let go")

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
        assert state.hub.connection_total == 0

        # Every connection is aiohttp's again and carries the next poll: one expires empty,
        # one is answered from the history, the rest wait for the next message.
        await until(lambda: len(runner.server.connections) == 5, "connections given back")
        conns[1][1].write(get(f"/lp/hp?timeout=0.05&cursor={cursors[1]}"))
        doc = await answer(conns[1][0])
        assert doc == {"messages": [], "cursor": cursors[1]}
        conns[2][1].write(get("/lp/hp?history=1"))
        assert [m["data"] for m in (await answer(conns[2][0]))["messages"]] == ["m1"]
        for _, writer in conns[3:]:
            writer.write(get(f"/lp/hp?cursor={cursors[3]}"))
        await until(
            lambda: state.hub.connection_total == 2 and len(runner.server.connections) == 3,
            "2 polls handed off again, 3 idle keep-alive connections with aiohttp",
        )

        # A client that leaves while its poll waits is unregistered.
        conns[4][1].close()
        await until(lambda: state.hub.connection_total == 1, "the poll to be let go")

        # Draining answers the last poll with its cursor, then closes the connection.
        state.draining = True
        state.hub.drain()
        await asyncio.wait_for(state.hub.all_gone(), DEADLINE)
        doc = await answer(conns[3][0])
        assert doc == {"messages": [], "cursor": cursors[3]}
        assert await asyncio.wait_for(conns[3][0].read(), DEADLINE) == b""
        for _, writer in conns[:4]:
            writer.close()


async def ws_scenario() -> None:
    async with in_process() as (state, runner, port):
        conns = [await open_ws(port, "/ws/hw") for _ in range(4)]
        await until(lambda: state.hub.connection_total == 4, "4 held websockets")
        await until(lambda: aiohttp_leftovers(runner) == NOTHING, "aiohttp to let go")

        await state.hub.publish([("hw", b'"m1"')])
        for reader, _ in conns:
            opcode, payload = await read_frame(reader)
            assert opcode == TEXT and json.loads(payload)["data"] == "m1"

        # Pings are answered, data frames ignored, a frame split over writes put together.
        (r0, w0), (r1, w1), (r2, w2), (r3, w3) = conns
        w0.write(masked(PING, b"hi"))
        assert await read_frame(r0) == (PONG, b"hi")
        ping = masked(PING, b"again")
        w1.write(masked(TEXT, b"ignored") + ping[:3])
        await asyncio.sleep(0)
        w1.write(ping[3:])
        assert await read_frame(r1) == (PONG, b"again")

        # The client closes: the server answers with the same code and lets go.
        w2.write(masked(CLOSE, struct.pack("!H", 1000)))
        assert await read_frame(r2) == (CLOSE, struct.pack("!H", 1000))
        assert await asyncio.wait_for(r2.read(), DEADLINE) == b""
        # A frame that breaks the protocol (unmasked) is closed with 1002.
        w3.write(ws_frame(TEXT, b"unmasked"))
        opcode, payload = await read_frame(r3)
        assert opcode == CLOSE and payload[:2] == struct.pack("!H", 1002)
        w3.write(masked(CLOSE, payload[:2]))
        assert await asyncio.wait_for(r3.read(), DEADLINE) == b""
        await until(lambda: state.hub.connection_total == 2, "2 websockets let go")

        # Draining closes with 1012 (service restart) and waits for the client's close.
        state.hub.drain()
        for reader, writer in conns[:2]:
            opcode, payload = await read_frame(reader)
            assert opcode == TEXT and json.loads(payload)["type"] == "reconnect"
            assert await read_frame(reader) == (CLOSE, struct.pack("!H", 1012) + b"shutdown")
            writer.write(masked(CLOSE, struct.pack("!H", 1012)))
            assert await asyncio.wait_for(reader.read(), DEADLINE) == b""
        await asyncio.wait_for(state.hub.all_gone(), DEADLINE)
        assert state.hub.stats.disconnects == {"client": 2, "shutdown": 2}
        for _, writer in conns:
            writer.close()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize(
    "run", [scenario, poll_scenario, ws_scenario], ids=["streams", "polls", "websockets"]
)
def test_held_connections_leave_aiohttp_and_keep_working(
    loop: str, run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(longpoll, "HAND_OFF_AFTER", 0.05)
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
