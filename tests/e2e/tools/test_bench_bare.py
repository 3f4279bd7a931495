"""The bench's bare server (`pushserver_bench.bare`), the floor experiment 9 is read against:
started for real and spoken to in nchan's protocol, as the bench speaks it; then experiment 9,
quick, against one the bench starts itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from pushserver_bench.bare import BareProcess
from pushserver_measure.http11 import parse_head, request_bytes

from ...inprocess import DEADLINE, read_response
from .test_bench import run_bench
from .test_bench_nchan import check_figures, quick_tables


@pytest.fixture(scope="module")
def bare():
    with BareProcess() as server:
        yield server


async def connect(server: BareProcess) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


def get(path: str, headers: dict[str, str] | None = None) -> bytes:
    return request_bytes("GET", "bench", path, headers=headers)


def post(path: str, body: bytes) -> bytes:
    return request_bytes("POST", "bench", path, body)


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    raw, body = await read_response(reader)
    head = parse_head(raw)
    return head.status, head.headers, body


async def request(server: BareProcess, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await connect(server)
    try:
        writer.write(raw)
        return await answer(reader)
    finally:
        writer.close()


async def count(server: BareProcess, channel: str) -> int:
    status, _, body = await request(server, get(f"/pub/{channel}", {"Accept": "application/json"}))
    assert status == 200
    return int(orjson.loads(body)["subscribers"])


async def wait_count(server: BareProcess, channel: str, n: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while (seen := await count(server, channel)) != n:
        assert loop.time() < deadline, f"{seen} subscribers of {channel}, not {n}"
        await asyncio.sleep(0.01)


async def test_a_poll_waits_for_the_next_message_and_carries_its_number(bare) -> None:
    assert await count(bare, "next") == 0
    status, _, _ = await request(bare, post("/pub/next", b'{"n":0}'))
    assert status == 202  # nobody held: accepted, as nchan answers
    reader, writer = await connect(bare)
    writer.write(get("/sub/next"))  # no validators: the next message, not the one before
    await wait_count(bare, "next", 1)
    status, _, _ = await request(bare, post("/pub/next", b'{"n":1}'))
    assert status == 201
    status, headers, body = await answer(reader)
    assert (status, headers["etag"], body) == (200, "2", b'{"n":1}')
    assert "last-modified" in headers
    # The same connection polls again with what it was given, and is held again.
    writer.write(get("/sub/next", {"If-None-Match": "2"}))
    await wait_count(bare, "next", 1)
    writer.close()
    await wait_count(bare, "next", 0)  # a client that leaves is no longer counted


async def test_a_poll_behind_is_answered_at_once_from_the_oldest_kept(bare) -> None:
    for n in range(3):
        await request(bare, post("/pub/behind", b'{"n":%d}' % n))
    status, headers, body = await request(bare, get("/sub/behind", {"If-None-Match": "1"}))
    assert (status, headers["etag"], body) == (200, "2", b'{"n":1}')
    status, headers, body = await request(bare, get("/sub/behind", {"if-none-match": "0"}))
    assert (status, headers["etag"], body) == (200, "1", b'{"n":0}')


async def test_requests_on_one_connection_are_answered_in_order(bare) -> None:
    # Counts sent behind a held poll wait for its answer, more of them than one head may
    # hold: the connection stops reading until the poll is answered, and loses none.
    reader, writer = await connect(bare)
    counts = 5000
    writer.write(get("/sub/order"))
    await wait_count(bare, "order", 1)
    writer.write(get("/pub/order", {"Accept": "application/json"}) * counts)
    await writer.drain()
    await request(bare, post("/pub/order", b'"first"'))
    assert (await answer(reader))[2] == b'"first"'
    for _ in range(counts):
        assert orjson.loads((await answer(reader))[2]) == {"subscribers": 0}
    writer.close()


async def test_an_event_stream_gets_every_message_as_a_data_line(bare) -> None:
    reader, writer = await connect(bare)
    writer.write(get("/sub/events", {"Accept": "text/event-stream"}))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/event-stream" in head
    await wait_count(bare, "events", 1)
    for n in range(2):
        assert (await request(bare, post("/pub/events", b'{"n":%d}' % n)))[0] == 201
    events = await asyncio.wait_for(reader.readexactly(2 * len(b'data: {"n":0}\n\n')), DEADLINE)
    assert events == b'data: {"n":0}\n\ndata: {"n":1}\n\n'
    writer.close()


async def test_what_it_does_not_serve_gets_a_clear_refusal(bare) -> None:
    assert (await request(bare, get("/elsewhere")))[0] == 404
    assert (await request(bare, get("/pub/")))[0] == 404  # no channel named
    assert (await request(bare, post("/sub/refused", b"{}")))[0] == 404  # not a publisher
    delete = b"DELETE /pub/refused HTTP/1.1\r\nHost: bench\r\n\r\n"
    assert (await request(bare, delete))[0] == 404
    for bad in (b"NONSENSE\r\n\r\n", b"POST /pub/x HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
        reader, writer = await connect(bare)
        writer.write(bad)
        status, headers, _ = await answer(reader)
        assert (status, headers["connection"]) == (400, "close")
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""  # and the connection ends
        writer.close()


def test_experiment_9_starts_the_bare_server_and_measures_it(tmp_path: Path) -> None:
    tables = quick_tables(tmp_path, "--target", "bare")
    assert tables[0]["title"].startswith("held subscribers under load: bare (publish http://")
    assert [t["servers"] for t in tables] == [[], []]  # the bare server says nothing of itself
    check_figures(tables)


def test_the_bare_server_takes_no_server_arguments() -> None:
    proc = run_bench("--only", "9", "--target", "bare", "--server-arg=--heartbeat=1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--server-arg is for pushserver; the bare server takes none" in proc.stderr
