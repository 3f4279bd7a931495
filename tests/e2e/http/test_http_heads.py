"""HTTP/1.1 heads and connections at the edges RFC 9110 and RFC 9112 draw, on every route: what
the front end serves itself and what it hands to aiohttp are refused or served alike."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import time

import aiohttp
import pytest

from ...abuse import stats

HOST = b"Host: x\r\n"
HEAD_END = b"\r\n\r\n"


async def exchange(port: int, data: bytes, *, pause: bytes = b"", expect: int = 0) -> bytes:
    """Send `data` (then `pause`'s bytes in a second write, once the first answer began or a
    moment passed) and read until the server closes, `expect` whole answers came, or it goes
    quiet for 2 s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = b""
    if pause:
        with contextlib.suppress(TimeoutError):
            got = await asyncio.wait_for(reader.read(65536), 0.3)
        writer.write(pause)
    with contextlib.suppress(TimeoutError, ConnectionError):
        while not (expect and len(answers(got)) >= expect):
            chunk = await asyncio.wait_for(reader.read(65536), 2)
            if not chunk:
                break
            got += chunk
    writer.close()
    return got


def answers(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The whole answers in `raw`, each (status, headers, body), with Content-Length bodies."""
    out = []
    while HEAD_END in raw:
        head, _, rest = raw.partition(HEAD_END)
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        size = int(headers.get("Content-Length", 0))
        if len(rest) < size:
            break
        out.append((int(lines[0].split()[1]), headers, rest[:size]))
        raw = rest[size:]
    return out


def error(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str]:
    status, headers, body = answer
    assert headers["Content-Type"] == "application/json"
    return status, json.loads(body)["error"]


@pytest.fixture(scope="module")
def port(shared_server):
    return shared_server.port


async def test_a_chunked_publish_whose_head_comes_alone_is_published(port):
    head = b"POST /pub/chunky HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
    got = answers(await exchange(port, head, pause=b'4\r\n"hi"\r\n0\r\n\r\n', expect=1))
    assert [status for status, _, _ in got] == [201]
    expect = head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n")
    raw = await exchange(port, expect, pause=b'4\r\n"ho"\r\n0\r\n\r\n', expect=2)
    assert raw.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert [status for status, _, _ in answers(raw[25:])] == [201]
    raw = await exchange(
        port, b"GET /lp/chunky?history=2&timeout=0 HTTP/1.1\r\n" + HOST + b"\r\n", expect=1
    )
    assert [m["data"] for m in json.loads(answers(raw)[0][2])["messages"]] == ['"hi"', '"ho"']


async def test_a_cursor_inside_another_parameter_is_not_taken_for_the_cursor(port):
    """`a` holds `x?cursor=...`: the query starts at the first `?`, so the real cursor is the
    second parameter, on a fresh connection and on one that sent a look-alike before."""
    async with aiohttp.ClientSession() as http:
        for n in range(3):
            async with http.post(f"http://127.0.0.1:{port}/pub/rq", json=n) as resp:
                assert resp.status == 201
    status, _, body = answers(
        await exchange(
            port, b"GET /lp/rq?a=b?cursor=1&timeout=0 HTTP/1.1\r\n" + HOST + b"\r\n", expect=1
        )
    )[0]
    assert (status, json.loads(body)["messages"]) == (200, [])
    epoch = json.loads(body)["cursor"].split(":")[1]
    at_head, at_start = f"rq:{epoch}:3".encode(), f"rq:{epoch}:0".encode()
    first = b"GET /lp/rq?a=x?cursor=%b&cursor=%b&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = await exchange(port, first % (at_head, at_head) + first % (at_start, at_head), expect=2)
    assert [json.loads(body)["messages"] for _, _, body in answers(raw)] == [[], []]


async def test_a_repeated_poll_is_held_to_the_line_limit(port):
    poll = b"GET /lp/long?cursor=%b&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = await exchange(port, poll % b"long:u0:0" + poll % (b"k" * 42_000), expect=2)
    got = answers(raw)
    assert got[0][0] == 200
    assert error(got[1]) == (414, "too_large")


@pytest.mark.parametrize(
    ("request_", "status", "code"),
    [
        (
            b"POST /pub/e HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 4\r\n\r\n",
            417,
            "bad_expect",
        ),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417, "bad_expect"),
        (
            b"POST /pub/e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            501,
            "not_implemented",
        ),
        (b"GET /lp/e?timeout=0 HTTP/1.1\r\n\r\n", 400, "bad_request"),
        (b"GET /stats HTTP/1.1\r\n\r\n", 400, "bad_request"),
        (b"GET /lp/e?timeout=0 HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "bad_request"),
        (b"GET /lp/e?timeout=0 HTTP/2.0\r\nHost: x\r\n\r\n", 505, "bad_version"),
        (b"GET /healthz\r\n\r\n", 505, "bad_version"),
        (b"GET /lp/?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_channel"),
        (b"GET /sse/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_channel"),
        (b"GET /lp/a/b?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_channel"),
        (b"POST /pub/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1", 400, "bad_channel"),
        (
            b"GET /ws/e HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            400,
            "bad_request",
        ),
    ],
)
async def test_heads_outside_the_rfcs_get_a_json_refusal(port, request_, status, code):
    """Whichever route: a JSON error, and for a head refused before routing, the connection
    closed after it (what follows is not read as a request)."""
    raw = await exchange(port, request_ + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", expect=2)
    got = answers(raw)
    assert error(got[0]) == (status, code)
    if status in (417, 501, 505) or code == "bad_request":
        assert [s for s, _, _ in got] == [status]


async def test_a_head_ended_by_bare_line_feeds_is_refused_at_once(port):
    """Alone, it would wait for a CRLF until --request-timeout (RFC 9112 section 2.2 lets a
    server refuse it)."""
    got = answers(await exchange(port, b"GET /lp/e?timeout=0 HTTP/1.1\nHost: x\n\n", expect=1))
    assert [error(answer) for answer in got] == [(400, "bad_request")]


async def test_heads_the_rfcs_allow_are_served(port):
    absolute = b"GET http://x/lp/abs?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    aiohttp_route = b"GET HTTP://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    legacy = b"GET /lp/abs?timeout=0 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    empty_host = b"GET /lp/abs?timeout=0 HTTP/1.1\r\nHost:\r\n\r\n"
    got = answers(await exchange(port, absolute + aiohttp_route + legacy + empty_host, expect=4))
    assert [status for status, _, _ in got] == [200] * 4


async def test_a_chunked_request_aiohttp_answers_keeps_its_connection(port):
    """The front end finds where a chunked body ends (its last chunk) and passes aiohttp that
    much: the connection stays kept alive, and the subscribe request after it is served on it,
    as after any other request aiohttp answers."""
    chunked = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n"
    )
    poll = b"GET /lp/pz?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    got = answers(await exchange(port, chunked + poll, pause=chunked + poll, expect=4))
    assert [(status, headers.get("Connection")) for status, headers, _ in got] == [(200, None)] * 4
    assert [body for _, _, body in got][::2] == [b"ok", b"ok"]
    assert all(json.loads(body)["messages"] == [] for _, _, body in got[1::2])


def _sent_before_blocked(port: int, request: bytes, most: int) -> int:
    """Bytes of `request`, pipelined again and again without reading an answer, that the
    connection took before it stayed unwritable for 3 s (or `most`): a server that reads on,
    however slowly, takes more within that time."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        sent = 0
        while sent < most:
            if not select.select([], [sock], [], 3.0)[1]:
                return sent
            with contextlib.suppress(BlockingIOError):
                sent += sock.send(request * 16)
        return sent


async def test_a_client_that_never_reads_its_answers_is_not_read_without_end(server_factory):
    """Pipelined polls answered with 30 KB each: once the answers back up, the server stops
    reading the client's requests, and its memory stays where it was."""
    srv = server_factory()
    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            async with http.post(f"{srv.url}/pub/hot", data="x" * 300) as resp:
                assert resp.status == 201
    before = (await stats(srv.url))["rss_bytes"]
    request = b"GET /lp/hot?history=100&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    started = time.monotonic()
    sent = await asyncio.to_thread(_sent_before_blocked, srv.port, request, 20 << 20)
    after = (await stats(srv.url))["rss_bytes"]
    print(
        f"took {sent:,} bytes in {time.monotonic() - started:.1f} s; "
        f"RSS {before >> 20} -> {after >> 20} MB"
    )
    assert sent < 8 << 20, "the server read on while its answers backed up"
    assert after - before < 64 << 20
