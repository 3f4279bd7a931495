"""A server in the test's own process and loop, for tests that look at its objects.

It listens on an ephemeral loopback port like any other; clients are raw asyncio connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
from aiohttp import web

from pushserver.config import Settings
from pushserver.core.hub import Hub
from pushserver.web.app import create_app
from pushserver.web.server import Serving, listening_socket, start_serving
from pushserver.web.state import ServerState

DEADLINE = 20.0


async def until(check: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """Poll `check` every loop turn (the server runs in this loop) until a deadline."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what} ({timeout} s)")
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def serving(hub_type: type[Hub] = Hub, **settings: object) -> AsyncIterator[Serving]:
    """Started as `pushserver.web.server` starts it: the front end accepts, aiohttp serves what
    it passes on. `hub_type`: the hub's class (`create_app`)."""
    config = Settings(port=0, **settings)
    app = await create_app(config, hub_type=hub_type)
    started = await start_serving(app, listening_socket(config))
    try:
        yield started
    finally:
        started.listener.close()
        await started.runner.cleanup()


@contextlib.asynccontextmanager
async def in_process(
    hub_type: type[Hub] = Hub, **settings: object
) -> AsyncIterator[tuple[ServerState, web.AppRunner, int]]:
    """`serving`, as its state, its aiohttp runner and the port it listens on."""
    async with serving(hub_type, **settings) as started:
        yield started.state, started.runner, started.listener.sockets[0].getsockname()[1]


def get(path: str, version: str = "1.1", headers: str = "") -> bytes:
    """The bytes of a GET request."""
    return f"GET {path} HTTP/{version}\r\nHost: x\r\n{headers}\r\n".encode()


async def open_stream(
    port: int, path: str, version: str = "1.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(get(path, version))
    head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head


async def read_until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    return await asyncio.wait_for(reader.readuntil(marker), DEADLINE)


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked body: what the server wrote in one go."""
    size = int(await read_until(reader, b"\r\n"), 16)
    data = await asyncio.wait_for(reader.readexactly(size + 2), DEADLINE)
    return data[:-2]


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One HTTP response with a Content-Length body: (head, body)."""
    head = await read_until(reader, b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    body = await asyncio.wait_for(reader.readexactly(length), DEADLINE)
    return head, body


async def poll(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str
) -> tuple[int, dict]:
    """One GET on a kept-alive connection, its answer a JSON body: (status, body)."""
    writer.write(get(target))
    head, body = await read_response(reader)
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


async def publish(port: int, channel: str, data: object) -> None:
    """Publish `data` as JSON, asserting it was taken."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/pub/{channel}", json=data) as resp,
    ):
        assert resp.status == 201


def kept_data(state: ServerState, channel: str) -> list[bytes]:
    """The data of each message the broker keeps for `channel`, as it was published (cut out of
    the envelope head a message is kept as)."""
    kept = state.hub.broker.history.get(channel)
    if kept is None:
        return []
    data, tail = b',"data":', b',"cursor":"'
    heads = [m.head for m in kept.messages(0, kept.last_id)]
    return [head[head.index(data) + len(data) : -len(tail)] for head in heads]
