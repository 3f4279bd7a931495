"""Held NDJSON and SSE streams are handed off from aiohttp once their head is out.

The server runs in this process (on both loops it supports) so the test can look at what aiohttp
still holds: nothing of a handed-off connection may remain (no `RequestHandler`, no request
task, nothing in the server's connection list), while the socket keeps working: messages and
heartbeats arrive, a client leaving is noticed, and a drain ends each body properly.
"""

from __future__ import annotations

import asyncio
import gc
import json

import pytest
import uvloop
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from .inprocess import DEADLINE, in_process, open_stream, read_until, until


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
        nothing = {"handlers": 0, "tasks": 0, "connections": 0}
        await until(lambda: aiohttp_leftovers(runner) == nothing, "aiohttp to let go")

        # A pipelined request on a held stream is read and ignored; the stream goes on.
        streams[0][1].write(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
        # Heartbeats still reach a handed-off stream.
        await read_until(streams[1][0], b"\r\n\n\r\n")

        await state.broker.publish([("ho", b'"hello"')])
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
        assert len(state.hub.channel("ho").streams) >= 1

        # Draining: each stream is told to reconnect, its body is ended, then the socket closed.
        state.hub.drain()
        await asyncio.wait_for(state.hub.streams_gone(), DEADLINE)
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


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_held_streams_leave_aiohttp_and_keep_working(loop: str) -> None:
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(scenario())
