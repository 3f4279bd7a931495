"""HEAD (RFC 9110 section 9.3.2) on every route and `OPTIONS *` (RFC 9112 section 3.2.4), read
from raw sockets: a HEAD's answer is the head its GET would begin with and no byte more, so the
answer to the next request on the connection starts right after that head. On a subscribe path
a HEAD is checked as its GET is, refused alike, and holds nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest

from pushserver.core.tokens import mint
from pushserver.launcher import ServerProcess

from ...inprocess import in_process

ORIGIN = "https://app.example"
KEY = "head-method-publish-key"
SECRET = "head-method-subscribe-secret-" + "0123456789abcdef" * 3
DEADLINE = 20.0
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
UNSENT = frozenset(("Date", "Content-Length", "Transfer-Encoding", "Connection"))
"""What a HEAD's answer may leave out or say otherwise than its GET's: the length of a body
it does not send, and how a held GET's body is framed and ends."""

Answer = tuple[int, dict[str, str], bytes]


def request(method: str, target: str, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"{method} {target} HTTP/{version}", "Host: x", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    """Status and headers of an answer's head (`raw` ends with its blank line)."""
    lines = raw.decode("latin-1").split("\r\n")[:-2]
    assert lines[0].startswith("HTTP/1."), raw[:200]
    return int(lines[0].split()[1]), dict(line.split(": ", 1) for line in lines[1:])


async def read_answer(reader: asyncio.StreamReader, method: str) -> Answer:
    """The next answer: its body by Content-Length, none for a HEAD whatever it says."""
    status, headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
    length = 0 if method == "HEAD" else int(headers.get("Content-Length", 0))
    return status, headers, await reader.readexactly(length)


async def exchange(port: int, requests: list[bytes]) -> list[Answer]:
    """`requests` pipelined on one connection, then a GET of /healthz whose answer must follow
    the last of theirs at once; their answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(requests) + HEALTHZ)
        async with asyncio.timeout(DEADLINE):
            got = [await read_answer(reader, r.split(b" ", 1)[0].decode()) for r in requests]
            assert (await read_answer(reader, "GET"))[2] == b"ok"
    finally:
        writer.close()
    return got


async def closing(port: int, data: bytes) -> bytes:
    """All the server sends for `data` until it closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        async with asyncio.timeout(DEADLINE):
            return await reader.read()
    finally:
        writer.close()


class Connection:
    """A kept-alive client connection, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, method: str, target: str, *headers: str) -> None:
        self.writer.write(request(method, target, *headers))

    async def answer(self, method: str) -> Answer:
        async with asyncio.timeout(DEADLINE):
            return await read_answer(self.reader, method)

    async def ask(self, method: str, target: str, *headers: str) -> Answer:
        self.send(method, target, *headers)
        return await self.answer(method)


@contextlib.asynccontextmanager
async def connected(port: int) -> AsyncIterator[Connection]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield Connection(reader, writer)
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def held_stream(port: int) -> AsyncIterator[None]:
    """A held NDJSON stream, from its head until the block ends."""
    async with connected(port) as conn:
        conn.send("GET", "/stream/one")
        async with asyncio.timeout(DEADLINE):
            assert parse_head(await conn.reader.readuntil(b"\r\n\r\n"))[0] == 200
        yield


async def until_stats(conn: Connection, ok: Callable[[dict], bool]) -> None:
    """Ask for /stats on `conn` until `ok` holds, within the deadline."""
    async with asyncio.timeout(DEADLINE):
        while not ok(json.loads((await conn.ask("GET", "/stats"))[2])):
            await asyncio.sleep(0.02)


async def held_head(port: int, data: bytes) -> dict[str, str]:
    """The headers of a held answer's head (a stream's), the connection then closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        async with asyncio.timeout(DEADLINE):
            status, headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
    finally:
        writer.close()
    assert status == 200
    return headers


def shown(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name not in UNSENT}


def code(answer: Answer) -> str:
    return json.loads(answer[2])["error"]


async def publish(url: str, channel: str, data: object, key: str | None = KEY) -> None:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/pub/{channel}", json=data, headers=auth) as resp,
    ):
        assert resp.status == 201


@pytest.fixture(scope="module")
def srv():
    args = ["--heartbeat", "1", "--cors-origin", ORIGIN, "--publish-key", KEY]
    with ServerProcess(args) as started:
        yield started


@pytest.mark.parametrize("origin", [(), (f"Origin: {ORIGIN}",)])
@pytest.mark.parametrize(
    "query", ["timeout=0", "timeout=30&limit=5", "callback=cb&timeout=30", "history=3"]
)
async def test_a_long_poll_head_is_its_gets_head_at_once(srv, query, origin):
    """Answered at once, whatever the GET would wait for; twice on one connection."""
    heads = await exchange(srv.port, [request("HEAD", f"/lp/hd,he?{query}", *origin)] * 2)
    at_once = f"/lp/hd,he?{query.replace('timeout=30', 'timeout=0')}&timeout=0"
    (get,) = await exchange(srv.port, [request("GET", at_once, *origin)])
    for status, headers, _ in heads:
        assert status == get[0] == 200
        assert "Content-Length" not in headers
        assert shown(headers) == shown(get[1])
        assert ("Access-Control-Allow-Origin" in headers) == bool(origin)


@pytest.mark.parametrize("kind", ["stream", "sse"])
async def test_a_held_stream_head_is_its_gets_head_and_keeps_the_connection(srv, kind):
    target = f"/{kind}/hs?pad=10"
    origin = f"Origin: {ORIGIN}"
    (status, headers, _), (again, _, _) = await exchange(
        srv.port, [request("HEAD", target, origin), request("HEAD", target)]
    )
    assert status == again == 200
    assert not {"Content-Length", "Transfer-Encoding", "Connection"} & set(headers)
    assert shown(headers) == shown(await held_head(srv.port, request("GET", target, origin)))


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/lp/bad!name", ()),
        ("/lp/" + ",".join(f"c{n}" for n in range(65)), ()),
        ("/lp/x?timeout=-1", ()),
        ("/lp/x?timeout=9999", ()),
        ("/lp/x?limit=0", ()),
        ("/lp/x?callback=1x", ()),
        ("/lp/x?history=99999", ()),
        ("/lp/x?cursor=garbage", (f"Origin: {ORIGIN}",)),
        ("/lp/bad!name?cursor=garbage&timeout=-1", ()),
        ("/stream/x?pad=99999", ()),
        ("/stream/x?cursor=bad&pad=-1", ()),
        ("/sse/x?cursor=nope", ()),
        ("/sse/x", ("Last-Event-ID: nope",)),
        ("/ws/x", ()),
        ("/ws/bad!name", ()),
        ("/ws/x", ("Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 12")),
    ],
)
async def test_a_head_its_get_refuses_is_refused_alike_without_the_body(srv, target, headers):
    (status, got, body), _ = await exchange(
        srv.port, [request("HEAD", target, *headers), request("HEAD", "/lp/fine")]
    )
    (get_status, get_headers, get_body), _ = await exchange(
        srv.port, [request("GET", target, *headers), request("HEAD", "/lp/fine")]
    )
    assert status == get_status and 400 <= status < 500
    assert body == b""
    assert got["Content-Length"] == str(len(get_body))
    assert shown(got) == shown(get_headers)


async def test_a_cursor_past_a_held_channel_is_refused_by_head_as_by_get(srv):
    await publish(srv.url, "hc", 1)
    ((_, _, body),) = await exchange(srv.port, [request("GET", "/lp/hc?history=1&timeout=0")])
    epoch = json.loads(body)["cursor"].split(":")[1]
    past, at = f"/lp/hc?cursor=hc:{epoch}:99", f"/sse/hc?cursor=hc:{epoch}:1"
    head, get, fine = await exchange(
        srv.port, [request("HEAD", past), request("GET", past), request("HEAD", at)]
    )
    assert head[0] == get[0] == 400 and code(get) == "bad_cursor"
    assert head[1]["Content-Length"] == str(len(get[2]))
    assert fine[0] == 200


async def test_head_then_get_on_one_connection_keeps_long_polls_kept(srv):
    """HEADs between long-polls on one kept-alive connection, around a poll the connection
    keeps for its re-poll: every answer in order, each poll with the next message."""
    await publish(srv.url, "kp", 0)

    async def poll(conn: Connection, cursor: str, message: int) -> str:
        conn.send("GET", f"/lp/kp?cursor={cursor}&timeout=10")
        await publish(srv.url, "kp", message)
        status, _, body = await conn.answer("GET")
        answer = json.loads(body)
        assert status == 200 and [m["data"] for m in answer["messages"]] == [message]
        return answer["cursor"]

    async with connected(srv.port) as conn:
        assert (await conn.ask("HEAD", "/lp/kp?timeout=10"))[0] == 200
        cursor = json.loads((await conn.ask("GET", "/lp/kp?history=1&timeout=0"))[2])["cursor"]
        cursor = await poll(conn, cursor, 1)
        cursor = await poll(conn, cursor, 2)  # the kept poll, held again
        assert (await conn.ask("HEAD", f"/lp/kp?cursor={cursor}&timeout=10"))[0] == 200
        cursor = await poll(conn, cursor, 3)
        cursor = await poll(conn, cursor, 4)
        assert (await conn.ask("HEAD", "/stats"))[0] == 401
        assert (await conn.ask("GET", "/healthz"))[2] == b"ok"


@pytest.mark.parametrize("path", ["/stats", "/metrics", "/channels/ad", "/openapi.yaml"])
async def test_admin_heads_need_the_key_as_their_gets_do(srv, path):
    await publish(srv.url, "ad", 1)
    bearer = f"Authorization: Bearer {KEY}"
    keyed, keyless, get = await exchange(
        srv.port,
        [request("HEAD", path, bearer), request("HEAD", path), request("GET", path)],
    )
    assert keyed[0] == 200 and keyed[2] == b""
    assert int(keyed[1]["Content-Length"]) > 0
    assert keyless[0] == get[0] == (200 if path == "/openapi.yaml" else 401)
    assert keyless[1]["Content-Length"] == str(len(get[2]))
    assert shown(keyless[1]) == shown(get[1])


async def test_healthz_and_an_unknown_channel_answer_head(srv):
    health, missing = await exchange(
        srv.port,
        [
            request("HEAD", "/healthz"),
            request("HEAD", "/channels/never-seen", f"Authorization: Bearer {KEY}"),
        ],
    )
    assert (health[0], health[1]["Content-Length"]) == (200, "2")
    assert missing[0] == 404


async def test_admin_heads_keep_the_loopback_rule(server_factory):
    srv = server_factory("--trusted-proxies", "127.0.0.1")
    remote = "X-Forwarded-For: 203.0.113.9"
    local, far, far_get = await exchange(
        srv.port,
        [
            request("HEAD", "/stats"),
            request("HEAD", "/stats", remote),
            request("GET", "/stats", remote),
        ],
    )
    assert local[0] == 200
    assert far[0] == far_get[0] == 403 and code(far_get) == "forbidden"
    assert far[1]["Content-Length"] == str(len(far_get[2]))


async def test_options_asterisk_lists_the_methods_and_no_other_method_takes_it(srv):
    ((status, headers, _),) = await exchange(srv.port, [request("OPTIONS", "*")])
    assert status == 204 and headers["Allow"] == "GET, HEAD, POST, OPTIONS"
    assert "Content-Length" not in headers
    for method in ("GET", "HEAD", "POST"):
        raw = await closing(srv.port, request(method, "*"))
        status, headers = parse_head(raw[: raw.index(b"\r\n\r\n") + 4])
        assert (status, headers["Connection"]) == (400, "close")
        body = raw[raw.index(b"\r\n\r\n") + 4 :]
        if method == "HEAD":
            assert body == b"" and int(headers["Content-Length"]) > 0
        else:
            assert json.loads(body)["error"] == "bad_request"


async def test_a_head_refused_before_routing_gets_no_body_either(srv):
    for data in (
        b"HEAD /lp/x HTTP/1.1\r\nHost: a b\r\n\r\n",
        request("HEAD", "/lp/x", "Host: y"),
        b"HEAD /lp/x HTTP/1.1\r\n\r\n",
        request("HEAD", "/lp/x", "Content-Length: 2") + b"{}",
        request("HEAD", "/lp/x", version="2.0"),
    ):
        raw = await closing(srv.port, data)
        assert raw.endswith(b"\r\n\r\n"), raw
        status, headers = parse_head(raw)
        assert status in (400, 505) and headers["Connection"] == "close"
        assert int(headers["Content-Length"]) > 0


async def test_an_http10_head_is_answered_then_closed(srv):
    raw = await closing(srv.port, request("HEAD", "/sse/old", version="1.0"))
    assert raw.startswith(b"HTTP/1.0 200 ") and raw.endswith(b"\r\n\r\n")


async def test_a_head_holds_no_slot_and_no_channel_and_meets_the_limits(server_factory):
    """Everything on one connection but the held streams, since a client's idle connections
    count against its per-address limit."""
    srv = server_factory("--max-connections-per-ip", "2", "--max-channels", "1")
    async with connected(srv.port) as conn:
        for _ in range(3):
            for kind in ("lp", "stream", "sse"):
                assert (await conn.ask("HEAD", f"/{kind}/one"))[0] == 200
        figures = json.loads((await conn.ask("GET", "/stats"))[2])
        assert figures["channels"] == 0
        assert not any(figures["connections"][kind] for kind in ("longpoll", "stream", "sse"))
        async with held_stream(srv.port), held_stream(srv.port):  # both slots: still free
            full = "/lp/two?timeout=0"
            head, get = await conn.ask("HEAD", full), await conn.ask("GET", full)
            assert head[0] == get[0] == 429 and code(get) == "too_many_connections"
            assert shown(head[1]) == shown(get[1])
        await until_stats(conn, lambda figures: figures["connections"]["stream"] == 0)
        room = "/sse/one,two"
        head, get = await conn.ask("HEAD", room), await conn.ask("GET", room)
        assert head[0] == get[0] == 503 and code(get) == "over_capacity"
        assert "Retry-After" in head[1] and shown(head[1]) == shown(get[1])


async def test_a_head_checks_the_token_as_its_get_does(server_factory):
    srv = server_factory("--subscribe-secret", SECRET)
    news, sports = mint(["news"], 60, SECRET), mint(["sports"], 60, SECRET)
    answers = await exchange(
        srv.port,
        [
            request("HEAD", "/sse/news"),
            request("HEAD", f"/sse/news?token={sports}"),
            request("HEAD", f"/lp/news?token={news}"),
        ],
    )
    assert [s for s, _, _ in answers] == [401, 403, 200]


async def draining_answer(port: int, method: str, target: str) -> Answer:
    """The answer of a draining server, which closes the connection after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request(method, target))
        async with asyncio.timeout(DEADLINE):
            answer = await read_answer(reader, method)
            assert await reader.read() == b""
    finally:
        writer.close()
    return answer


async def test_a_draining_server_refuses_head_as_get():
    async with in_process() as (state, _, port):
        state.draining = True
        for kind in ("lp", "stream", "sse", "ws"):
            head = await draining_answer(port, "HEAD", f"/{kind}/d")
            get = await draining_answer(port, "GET", f"/{kind}/d")
            assert head[0] == get[0] == 503 and code(get) == "draining"
            assert head[1]["Content-Length"] == str(len(get[2]))
            assert shown(head[1]) == shown(get[1])
