"""Publishes the front end serves itself (`web/front/publish.py`): pipelined publishes on one
connection, bodies cut mid-way or sent too slowly, chunked bodies, compressed bodies (gzip and
deflate read with zlib, others refused), `Expect: 100-continue`, bodies over the limit, CORS and
the access log, on both loops the server supports.
The server runs in this process so the test can see that aiohttp took no part and that every
connection the server held is gone once its client is.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import logging
import time
import zlib

import pytest
import uvloop

from pushserver.web.front import DONE
from pushserver.web.front.connection import Connection

from ...inprocess import DEADLINE, get, in_process, kept_data, read_response, read_until, until


def publish(path: str, body: bytes, headers: str = "", ctype: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\n{headers}\r\n"
    ).encode() + body


def chunked(path: str, chunks: list[bytes], headers: str = "") -> tuple[bytes, bytes]:
    """A chunked publish: its head, and its body (the chunks and the last chunk)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Transfer-Encoding: chunked\r\n{headers}\r\n"
    ).encode()
    body = b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    return head, body


async def created(reader: asyncio.StreamReader) -> dict | list:
    head, body = await read_response(reader)
    assert head.startswith(b"HTTP/1.1 201 Created\r\n"), head
    return json.loads(body)


async def refused(reader: asyncio.StreamReader, status: bytes) -> tuple[bytes, str]:
    head, body = await read_response(reader)
    assert head.startswith(b"HTTP/1.1 " + status), head
    return head, json.loads(body)["error"]


async def closed(reader: asyncio.StreamReader) -> None:
    assert await asyncio.wait_for(reader.read(), DEADLINE) == b""


def connections() -> list[Connection]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, Connection) and o.phase != DONE]


def live_connections() -> int:
    return len(connections())


def reading_body() -> bool:
    """Whether a connection waits for the rest of a request body."""
    return any(conn.reader is not None for conn in connections())


async def pipelined() -> None:
    """Single and batch publishes, keyed or not, and other requests in one write: answered in
    order on one connection, aiohttp never involved in a publish."""
    async with in_process() as (state, runner, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            publish("/pub/pp", b'{"n": 1}')
            + publish("/pub/pp", b'"two"', "Idempotency-Key: k-2\r\n")
            + publish("/pub/pp", b'"two"', "Idempotency-Key: k-2\r\n")
            + publish("/pub", b'[{"channel": "pp", "data": 3}, {"channel": "qq", "data": 4}]')
            + get("/lp/pp?history=10&timeout=0")
            + publish("/pub/pp", b"not json")
            + publish("/pub/pp", b"plain text", ctype="text/plain; charset=utf-8")
        )
        assert (await created(reader))["id"] == 1
        assert (await created(reader))["id"] == 2
        assert (await created(reader))["id"] == 2  # the repeated key published nothing
        batch = await created(reader)
        assert [(r["channel"], r["id"]) for r in batch] == [("pp", 3), ("qq", 1)]
        _, body = await read_response(reader)
        assert [m["data"] for m in json.loads(body)["messages"]] == [{"n": 1}, "two", 3]
        assert (await refused(reader, b"400"))[1] == "bad_json"
        assert (await created(reader))["id"] == 4  # the refusal kept the connection
        assert kept_data(state, "pp")[-1] == b'"plain text"'
        assert not runner.server.connections  # aiohttp answered none of them
        writer.close()


async def refused_by_plan() -> None:
    """A head whose channel name or idempotency key is refused is refused again each time it is
    repeated (served from the plan made of it, bodies of other lengths), after the rules as a
    parsed head is, and the connection goes on."""
    async with in_process() as (state, _, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        bad_key = "Idempotency-Key: has space\r\n"
        writer.write(
            b"".join(publish("/pub/no!", b'"%d"' % (10**n)) for n in range(3))
            + b"".join(publish("/pub/kk", b'"%d"' % (10**n), bad_key) for n in range(3))
            + publish("/pub/kk", b'"fine"')
        )
        for _ in range(3):
            assert (await refused(reader, b"400"))[1] == "bad_channel"
        for _ in range(3):
            assert (await refused(reader, b"400"))[1] == "bad_idempotency_key"
        assert await created(reader) == {
            "channel": "kk",
            "id": 1,
            "ts": pytest.approx(time.time(), abs=60),
            "subscribers": 0,
        }
        assert kept_data(state, "kk") == [b'"fine"']
        writer.close()


async def cut_and_slow() -> None:
    """A body cut mid-way or stalled publishes nothing, even when what came is valid JSON."""
    async with in_process(request_timeout=0.3) as (state, _, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("/pub/cut", b'"abc"' + b" " * 20)[:-20])
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("/pub/slow", b'"abc"' + b" " * 20)[:-20])
        await closed(reader)  # --request-timeout passed with the body unfinished
        head, body = chunked("/pub/cut", [b'"ab', b'c"'])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + body[:-5])  # the last chunk never comes
        writer.close()
        await until(lambda: live_connections() == 0, "every connection noticed gone")
        assert kept_data(state, "cut") == [] and kept_data(state, "slow") == []
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("/pub/cut", b'"whole"'))
        assert (await created(reader))["id"] == 1
        writer.close()


async def chunked_and_continue() -> None:
    """Chunked bodies in pieces, and `Expect: 100-continue` answered before the body."""
    async with in_process() as (state, _, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head, body = chunked("/pub/ck", [b'"ch', b"un", b'ked"'])
        writer.write(head + body[:7])  # a chunk cut in its middle
        await until(reading_body, "the body's first part read")
        writer.write(body[7:] + get("/healthz"))
        assert (await created(reader))["id"] == 1
        assert (await read_response(reader))[1] == b"ok"
        head, body = chunked("/pub", [b'[{"channel": "ck", "data": 2}]'])
        writer.write(head + body)
        assert [r["id"] for r in await created(reader)] == [2]
        assert kept_data(state, "ck") == [b'"chunked"', b"2"]

        writer.write(publish("/pub/ck", b'"later"', "Expect: 100-continue\r\n")[:-7])
        assert await read_until(reader, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b'"later"')
        assert (await created(reader))["id"] == 3
        writer.close()


async def compressed() -> None:
    """gzip and deflate bodies (zlib or raw deflate, whole or chunked in pieces) are published
    decompressed; one that inflates past the limit is refused as it inflates, a truncated one
    once read, and another content coding at once, naming the ones read."""
    async with in_process(max_message_bytes=1000) as (state, runner, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        raw = zlib.compressobj(wbits=-15)
        raw_deflate = raw.compress(b'"raw"') + raw.flush()
        head, body = chunked("/pub/gz", [*gzip.compress(b'"in pieces"').partition(b"\x00")])
        writer.write(
            publish("/pub/gz", gzip.compress(b'"one"'), "Content-Encoding: gzip\r\n")
            + publish("/pub/gz", zlib.compress(b'"two"'), "Content-Encoding: Deflate\r\n")
            + publish("/pub/gz", raw_deflate, "Content-Encoding: deflate\r\n")
            + head.replace(b"\r\n\r\n", b"\r\nContent-Encoding: x-gzip\r\n\r\n")
            + body
            + publish("/pub/gz", gzip.compress(b'"cut"')[:-6], "Content-Encoding: gzip\r\n")
            + publish(
                "/pub",
                gzip.compress(b'[{"channel": "gz", "data": 5}]'),
                "Content-Encoding: gzip\r\n",
            )
        )
        assert [(await created(reader))["id"] for _ in range(4)] == [1, 2, 3, 4]
        assert (await refused(reader, b"400"))[1] == "bad_request"  # read, so kept alive
        assert [r["id"] for r in await created(reader)] == [5]
        assert kept_data(state, "gz") == [b'"one"', b'"two"', b'"raw"', b'"in pieces"', b"5"]
        assert not runner.server.connections  # aiohttp answered none of them
        bomb = gzip.compress(b'"' + b"x" * 100_000 + b'"')  # 100 KB inflated, 140 B sent
        writer.write(
            publish("/pub/gz", bomb, "Content-Encoding: gzip\r\n")
            + publish("/pub/gz", gzip.compress(b'"after"'), "Content-Encoding: gzip\r\n")
        )
        assert (await refused(reader, b"413"))[1] == "too_large"  # all of it read: kept alive
        assert (await created(reader))["id"] == 6
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("/pub/gz", b"\x1b\x00\x00", "Content-Encoding: br\r\n"))
        head, code = await refused(reader, b"415")
        assert code == "unsupported_encoding" and b"Connection: close" in head  # body unread
        assert b"Accept-Encoding: gzip, deflate\r\n" in head
        await closed(reader)
        writer.close()
        assert state.hub.stats.limits_hit["max_message_bytes"] == 1
        assert len(kept_data(state, "gz")) == 6


async def bodies_of_many_reads() -> None:
    """Bodies written whole but read in several pieces, uvloop reading them one after another
    before any task runs: every piece reaches the body, for one message and for a batch."""
    async with in_process(max_message_bytes=1 << 20) as (state, _, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        one = b'"' + b"x" * 700_000 + b'"'
        batch = json.dumps([{"channel": "mr", "data": "y" * 8000}] * 60).encode()
        for n in (1, 2):
            writer.write(publish("/pub/mr", one) + publish("/pub", batch))
            assert (await created(reader))["id"] == 61 * n - 60
            assert [r["id"] for r in await created(reader)][-1] == 61 * n
        assert kept_data(state, "mr")[-61] == one and len(kept_data(state, "mr")[-1]) == 8002
        writer.close()


async def refused_before_body() -> None:
    """A refusal sent before the body was read closes the connection (the client reads the
    answer first); one sent after it keeps the connection."""
    async with in_process(publish_key="k", max_message_bytes=64) as (state, _, port):
        key = "Authorization: Bearer k\r\n"
        for request in (
            publish("/pub/big", b'"' + b"x" * 100 + b'"', key),  # over the limit, unread
            b"".join(chunked("/pub/big", [b'"', b"x" * 100, b'"'], key)),  # grows past it
            publish("/pub/big", b'"x"', "Expect: 100-continue\r\n")[:-3],  # no key
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            head, code = await refused(reader, b"413" if key.encode() in request else b"401")
            assert code in ("too_large", "unauthorized")
            assert b"Connection: close" in head and b"100 Continue" not in head
            await closed(reader)
            writer.close()
        assert state.hub.stats.limits_hit["max_message_bytes"] == 2
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            publish("/pub", b'[{"channel": "big", "data": "' + b"x" * 100 + b'"}]', key)
            + publish("/pub/big", b'"small"', key)
        )
        assert (await refused(reader, b"413"))[1] == "too_large"
        assert (await created(reader))["id"] == 1
        assert kept_data(state, "big") == [b'"small"']
        writer.close()


class Recording:
    """A server-side transport that notes, at each write, how many SSE deliveries the hub had
    written by then."""

    def __init__(self, transport, state, seen: list[int]) -> None:
        self.transport, self.state, self.seen = transport, state, seen

    def write(self, data: bytes) -> None:
        self.seen.append(self.state.hub.stats.delivered["sse"])
        self.transport.write(data)

    def __getattr__(self, name: str):
        return getattr(self.transport, name)


async def repeated_heads() -> None:
    """A publisher sending one head again and again (bodies of one length): each publish is its
    own, a refusal between them keeps the connection, and HTTP/1.0 keep-alive is answered as
    such. A subscriber held on the channel has been written to before the publisher's 201."""
    async with in_process() as (state, _, port):
        sse, sse_writer = await asyncio.open_connection("127.0.0.1", port)
        sse_writer.write(get("/sse/rh"))
        await read_until(sse, b"\r\n\r\n")
        await until(lambda: state.hub.audience("rh") == 1, "the subscriber held")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        port_here = writer.get_extra_info("sockname")[1]

        def publisher() -> list[Connection]:
            return [
                c
                for c in connections()
                if c.io.transport.get_extra_info("peername")[1] == port_here
            ]

        await until(publisher, "the publisher's connection accepted")
        [conn] = publisher()
        delivered_at_answer: list[int] = []
        conn.out = Recording(conn.out, state, delivered_at_answer)
        writer.write(publish("/pub/rh", b'"a"') + publish("/pub/rh", b'"b"'))
        for n in (1, 2):
            assert await created(reader) == {
                "channel": "rh",
                "id": n,
                "ts": pytest.approx(time.time(), abs=60),
                "subscribers": 1,
            }
        assert delivered_at_answer == [1, 2]  # each delivery written before its answer
        writer.write(publish("/pub/rh", b"{x}") + publish("/pub/rh", b'"c"'))
        assert (await refused(reader, b"400"))[1] == "bad_json"
        assert (await created(reader))["id"] == 3
        old = publish("/pub/rh", b'"d"', "Connection: keep-alive\r\n").replace(
            b"HTTP/1.1", b"HTTP/1.0"
        )
        for n in (4, 5):
            writer.write(old)
            head, body = await read_response(reader)
            assert head.startswith(b"HTTP/1.0 201 Created\r\n"), head
            assert b"Connection: keep-alive\r\n" in head and json.loads(body)["id"] == n
        assert kept_data(state, "rh") == [b'"a"', b'"b"', b'"c"', b'"d"', b'"d"']
        writer.close()
        sse_writer.close()


class Parses:
    """The front end's head parser, counting the heads it parses."""

    def __init__(self, parser) -> None:
        self.parser, self.heads = parser, 0

    def parse(self, raw: bytes):
        self.heads += 1
        return self.parser.parse(raw)


async def heads_of_many_lengths() -> None:
    """A publisher whose bodies change length sends one head but for its `Content-Length`: the
    head is parsed once, and every publish after it, of any length, whole in one read or its
    body still to come, publishes its own body; a length over the limit is refused as the
    parsed head's would be, closing the connection."""
    async with in_process(max_message_bytes=64) as (state, _, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await until(connections, "the publisher's connection accepted")
        [conn] = connections()
        parses = conn.front.parser = Parses(conn.front.parser)
        bodies = [b'"a"', b'{"n": 12345}', b'"' + b"y" * 50 + b'"', b"7"]
        writer.write(b"".join(publish("/pub/ln", body, "X-Id: 1\r\n") for body in bodies))
        for n in range(1, len(bodies) + 1):
            assert (await created(reader))["id"] == n
        assert parses.heads == 1
        late = publish("/pub/ln", b'"late body"', "X-Id: 1\r\n")
        writer.write(late[:-5])
        await until(reading_body, "the body awaited")
        writer.write(late[-5:])
        assert (await created(reader))["id"] == 5
        writer.write(publish("/pub/ln", b"8", "X-Id: 2\r\n"))  # another head: parsed
        assert (await created(reader))["id"] == 6
        assert parses.heads == 2
        writer.write(publish("/pub/ln", b'"' + b"z" * 70 + b'"', "X-Id: 2\r\n"))
        head, code = await refused(reader, b"413")
        assert code == "too_large" and b"Connection: close" in head
        await closed(reader)
        assert parses.heads == 2
        assert kept_data(state, "ln") == [
            b'"a"',
            b'{"n":12345}',
            bodies[2],
            b"7",
            b'"late body"',
            b"8",
        ]
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(publish("/pub/cut", b"1", "X-Id: 1\r\n"))
        assert (await created(reader))["id"] == 1
        writer.write(publish("/pub/cut", b'"' + b"c" * 40 + b'"', "X-Id: 1\r\n")[:-10])
        await until(reading_body, "the cut body awaited")
        writer.close()  # gone mid-body: the repeat published nothing
        await until(lambda: live_connections() == 0, "the cut publisher noticed gone")
        assert kept_data(state, "cut") == [b"1"]


async def many_lengths_at_once() -> None:
    """Publishers on several connections at once, one head shape, bodies of changing lengths:
    the repeat is shared, each connection parses its first head only, and every body is
    published once, each connection's in its order."""
    async with in_process() as (state, _, port):
        opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        await until(lambda: len(connections()) == 4, "the publishers' connections accepted")
        front = connections()[0].front
        parses = front.parser = Parses(front.parser)

        async def publisher(k: int) -> list[int]:
            reader, writer = opened[k]
            bodies = [b'"%d-%s"' % (k, b"p" * (n * 7 % 23)) for n in range(6)]
            writer.write(b"".join(publish("/pub/many", body) for body in bodies))
            return [(await created(reader))["id"] for _ in bodies]

        ids = await asyncio.gather(*(publisher(k) for k in range(4)))
        assert all(got == sorted(got) for got in ids)
        assert sorted(i for got in ids for i in got) == list(range(1, 25))
        assert parses.heads == 4
        data = kept_data(state, "many")
        for k in range(4):
            mine = [d for d in data if d.startswith(b'"%d-' % k)]
            assert mine == [b'"%d-%s"' % (k, b"p" * (n * 7 % 23)) for n in range(6)]
        for _, writer in opened:
            writer.close()


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def cors_and_log() -> None:
    """CORS headers on publish answers and refusals, preflights still answered, and an access
    log line per publish, as for every other answer."""
    app = "https://app.example"
    logged = Lines()
    access = logging.getLogger("aiohttp.access")
    access.addHandler(logged)
    access.setLevel(logging.INFO)
    try:
        async with in_process(cors_origin=app, access_log=True) as (_, _, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            origin = f"Origin: {app}\r\n"
            writer.write(
                b"OPTIONS /pub/co HTTP/1.1\r\nHost: x\r\nAccess-Control-Request-Method: POST\r\n"
                + origin.encode()
                + b"\r\n"
                + publish("/pub/co", b'"x"', origin)
                + publish("/pub/bad!name", b'"x"', origin)
            )
            head = await read_until(reader, b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 204 ") and b"Access-Control-Allow-Methods" in head
            head, _ = await read_response(reader)
            assert head.startswith(b"HTTP/1.1 201 ")
            assert f"Access-Control-Allow-Origin: {app}\r\n".encode() in head
            head, code = await refused(reader, b"400")
            assert code == "bad_channel" and b"Access-Control-Allow-Origin" in head
            writer.close()
    finally:
        access.removeHandler(logged)
    assert any('"POST /pub/co HTTP/1.1" 201' in line for line in logged.lines)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize(
    "run",
    [
        pipelined,
        refused_by_plan,
        cut_and_slow,
        chunked_and_continue,
        compressed,
        bodies_of_many_reads,
        refused_before_body,
        repeated_heads,
        heads_of_many_lengths,
        many_lengths_at_once,
        cors_and_log,
    ],
    ids=[
        "pipelined",
        "refused-by-plan",
        "cut",
        "chunked",
        "compressed",
        "reads",
        "refused",
        "repeated",
        "lengths",
        "lengths-at-once",
        "cors",
    ],
)
def test_native_publish(loop: str, run) -> None:
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
