"""Compression end to end, against the real server.

Lockstep: each message is published only once the client has reported the one before, so a
server or decoder that held a message back (a compressor waiting for more, a decoder waiting
for the trailer) would never see the next, and the test fails at its deadline; no timing is
asserted. Decoders: `curl --compressed -N` (SSE, NDJSON), Chromium's EventSource (standard and
compact framing). Then what is compressed and what is not: long-poll answers from 512 bytes,
JSONP, `Accept-Encoding` edge cases, HEAD, errors, `--no-compress`, and permessage-deflate's
negotiation on WebSocket.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.request
import zlib
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.sync.client import connect

from pushserver.launcher import ServerProcess
from pushserver.wire.compression import GZIP_HEADER, SYNC_TAIL, deflate
from pushserver.wire.framing import NDJSON, SSE

from ...lockstep import wait_for
from ...system import ensure_command
from ..clients import test_browser_js
from .test_compression_decoders import Consumer, page_consumer, subprocess_consumer

browser = test_browser_js.browser
MESSAGES = 12
PAYLOAD = '{"symbol":"ACME","price":%d.25,"volume":%d,"venue":"XNAS","currency":"USD"}'


def publish(server: ServerProcess, channel: str, n: int) -> None:
    request = urllib.request.Request(
        f"{server.url}/pub/{channel}",
        data=(PAYLOAD % (100 + n, 1000 * n)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201


def raw_get(
    server: ServerProcess, path: str, headers: dict[str, str], method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-cased names) and body bytes as sent: nothing decoded."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def head_cursor(server: ServerProcess, channel: str) -> str:
    return json.loads(raw_get(server, f"/lp/{channel}?timeout=0", {})[2])["cursor"]


def lockstep(server: ServerProcess, channel: str, consumers: list[Consumer], first: int) -> None:
    """Publish messages `first`.. one at a time, each once every consumer has the one before."""
    for n in range(first, first + MESSAGES):
        publish(server, channel, n)
        for consumer in consumers:
            marker = f'"volume":{1000 * n}'
            wait_for(f"message {n}", lambda c=consumer, m=marker: c.has(m))


@pytest.fixture
def curl() -> Callable[..., Consumer]:
    started: list[Consumer] = []

    def start(url: str, accept: str) -> Consumer:
        command = [ensure_command("curl", "curl"), "-sS", "-N", "-i", "--compressed"]
        consumer = subprocess_consumer([*command, "-H", f"Accept: {accept}", url])
        started.append(consumer)
        return consumer

    yield start
    for consumer in started:
        consumer.stop()


@pytest.mark.parametrize(
    ("kind", "accept"), [("sse", "text/event-stream"), ("stream", "application/x-ndjson")]
)
def test_curl_decodes_every_message_as_it_is_published_and_the_trailer_at_shutdown(
    server_factory, curl, kind, accept
):
    server = server_factory("--heartbeat", "0.5")
    cursor = head_cursor(server, "quotes")
    first = curl(f"{server.url}/{kind}/quotes?pad=64", accept)
    wait_for("the stream's head", lambda: first.has("Content-Encoding: gzip"))
    wait_for("the stream's start", lambda: first.has(" " * 64))  # the padding, decoded
    lockstep(server, "quotes", [first], 0)
    beats = len(first.got())
    wait_for("a heartbeat", lambda: len(first.got()) > beats)  # the chain goes on after it
    # A second client from the start: its backlog, deflated for it, then the live messages.
    second = curl(f"{server.url}/{kind}/quotes?cursor={cursor}", accept)
    wait_for("the backlog", lambda: second.has(f'"volume":{1000 * (MESSAGES - 1)}'))
    lockstep(server, "quotes", [first, second], MESSAGES)
    assert server.stop() == 0
    for consumer in (first, second):  # the server's end: reconnect, trailer, exit 0
        wait_for("curl to end", consumer.done)
        lines = consumer.got()
        assert any('"type":"reconnect"' in line for line in lines)
        assert lines[-1] == "EXIT 0", lines[-3:]
        volumes = [json.loads(line[line.index("{") :]) for line in lines if '"volume"' in line]
        assert [v["data"]["volume"] for v in volumes] == [1000 * n for n in range(2 * MESSAGES)]


EVENT_SOURCE = """([url, channel]) => {
  window.got = [];
  const source = new EventSource(url);
  const push = (ev) => window.got.push(ev.type + ' ' + ev.lastEventId + ' ' + ev.data);
  source.onmessage = push;
  source.addEventListener(channel, push);
  source.onerror = () => window.got.push('ERROR');
}"""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    yield page
    context.close()


@pytest.mark.parametrize("compact", [False, True])
def test_chromium_eventsource_reads_every_message_as_it_is_published(server, page, compact):
    page.goto(f"{server.url}/healthz")
    query = "?compact=1" if compact else ""
    with page.expect_response(lambda r: "/sse/" in r.url) as opened:
        source = page_consumer(page, EVENT_SOURCE, [f"{server.url}/sse/scores{query}", "scores"])
    assert opened.value.headers.get("content-encoding") == "gzip"
    lockstep(server, "scores", [source], 0)
    lines = source.got()
    assert "ERROR" not in lines
    assert len(lines) == MESSAGES
    for n, line in enumerate(lines):
        kind, last_id, data = line.split(" ", 2)
        if compact:  # the channel as the event's type, the payload alone
            assert (kind, json.loads(data)["volume"]) == ("scores", 1000 * n)
        else:
            envelope = json.loads(data)
            assert (kind, envelope["data"]["volume"]) == ("message", 1000 * n)
            assert envelope["cursor"] == last_id
        assert last_id.startswith("scores:") and last_id.endswith(f":{n + 1}")


def gunzip(body: bytes) -> bytes:
    return zlib.decompress(body, 31)


@pytest.fixture(scope="module")
def backlog_server() -> Iterator[tuple[ServerProcess, str]]:
    """A server holding 20 messages on `news` after the cursor it yields."""
    with ServerProcess(["--heartbeat", "1"]) as srv:
        cursor = head_cursor(srv, "news")
        for n in range(20):
            publish(srv, "news", n)
        yield srv, cursor


@pytest.mark.parametrize(
    ("accept", "gzipped"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("x-gzip", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),
        ("*;q=0, identity", False),
        ("br", False),
        ("identity", False),
        (None, False),
        ("gzip;q=nonsense", False),
    ],
)
def test_a_long_poll_backlog_is_gzipped_when_the_request_accepts_it(
    backlog_server, accept, gzipped
):
    server, cursor = backlog_server
    headers = {} if accept is None else {"Accept-Encoding": accept}
    status, got, body = raw_get(server, f"/lp/news?cursor={cursor}", headers)
    plain = raw_get(server, f"/lp/news?cursor={cursor}", {})[2]
    assert status == 200
    assert len(json.loads(plain)["messages"]) == 20
    if gzipped:
        assert got["content-encoding"] == "gzip" and got["vary"] == "Accept-Encoding"
        assert int(got["content-length"]) == len(body)
        assert gunzip(body) == plain
        assert len(body) < 0.4 * len(plain)  # the target: at least 60 % fewer bytes
    else:
        assert "content-encoding" not in got and "vary" not in got and body == plain


def test_a_short_answer_goes_as_it_is_unless_the_request_refuses_that(backlog_server):
    server, _ = backlog_server
    cursor = head_cursor(server, "news")
    short = f"/lp/news?cursor={cursor}&timeout=0"
    _, got, body = raw_get(server, short, {"Accept-Encoding": "gzip"})
    assert "content-encoding" not in got and got["vary"] == "Accept-Encoding"
    _, refused, zipped = raw_get(server, short, {"Accept-Encoding": "gzip, identity;q=0"})
    assert refused["content-encoding"] == "gzip" and gunzip(zipped) == body


def test_jsonp_and_kept_alive_polls_are_gzipped_too(backlog_server):
    server, cursor = backlog_server
    path = f"/lp/news?cursor={cursor}&callback=got"
    _, got, body = raw_get(server, path, {"Accept-Encoding": "gzip"})
    assert got["content-encoding"] == "gzip" and got["content-type"] == "application/javascript"
    assert gunzip(body) == raw_get(server, path, {})[2]
    assert gunzip(body).startswith(b"got({")
    # a kept-alive connection, the same poll twice: the repeated head served from its parse
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for _ in range(2):
            conn.request("GET", f"/lp/news?cursor={cursor}", headers={"Accept-Encoding": "gzip"})
            answer = conn.getresponse()
            assert answer.getheader("Content-Encoding") == "gzip"
            assert len(json.loads(gunzip(answer.read()))["messages"]) == 20
    finally:
        conn.close()


def test_errors_and_operator_routes_are_never_compressed(backlog_server):
    server, _ = backlog_server
    gzip = {"Accept-Encoding": "gzip"}
    for path in ("/lp/news?cursor=news:nonsense", "/sse/news?pad=-1", "/nowhere", "/lp/bad%20name"):
        status, got, body = raw_get(server, path, gzip)
        assert status >= 400 and "content-encoding" not in got, (path, got)
        assert json.loads(body)["error"]
    status, got, body = raw_get(server, "/stats", gzip)
    assert status == 200 and "content-encoding" not in got and json.loads(body)


@pytest.mark.parametrize("kind", ["sse", "stream", "lp"])
def test_head_answers_with_the_headers_its_get_begins_with(backlog_server, kind):
    server, _ = backlog_server
    _, zipped, body = raw_get(server, f"/{kind}/news", {"Accept-Encoding": "gzip"}, "HEAD")
    _, plain, _ = raw_get(server, f"/{kind}/news", {}, "HEAD")
    assert body == b""
    assert zipped["vary"] == "Accept-Encoding" and "vary" not in plain
    assert "content-encoding" not in plain
    # a held stream is compressed whatever it carries; a poll's answer only from 512 bytes
    assert zipped.get("content-encoding") == (None if kind == "lp" else "gzip")


def test_no_compress_sends_every_answer_as_it_is(server_factory):
    server = server_factory("--no-compress")
    cursor = head_cursor(server, "news")
    for n in range(5):
        publish(server, "news", n)
    _, got, body = raw_get(server, f"/lp/news?cursor={cursor}", {"Accept-Encoding": "gzip"})
    assert "content-encoding" not in got and "vary" not in got
    assert len(json.loads(body)["messages"]) == 5
    _, got, _ = raw_get(server, "/sse/news", {"Accept-Encoding": "gzip"}, "HEAD")
    assert "content-encoding" not in got and "vary" not in got
    with connect(f"ws://127.0.0.1:{server.port}/ws/news") as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None


def ws_messages(server: ServerProcess, factory: ClientPerMessageDeflateFactory | None) -> str:
    """Subscribe over WebSocket offering `factory`'s permessage-deflate, send a compressed
    message and a ping (both must be read: the connection stays up), read 5 messages."""
    extensions = None if factory is None else [factory]
    url = f"ws://127.0.0.1:{server.port}/ws/live"
    with connect(url, extensions=extensions, compression=None) as ws:
        answer = ws.response.headers.get("Sec-WebSocket-Extensions") or ""
        ws.send(json.dumps({"hello": "x" * 200}))  # compressed when negotiated: RSV1
        ws.ping().wait(10)
        for n in range(5):
            publish(server, "live", n)
            assert json.loads(ws.recv(10))["data"]["volume"] == 1000 * n
    return answer


def test_websocket_negotiates_permessage_deflate_and_reads_compressed_messages(server):
    chained = ws_messages(server, ClientPerMessageDeflateFactory(client_max_window_bits=True))
    assert chained == "permessage-deflate; client_no_context_takeover; server_max_window_bits=10"
    lone = ws_messages(server, ClientPerMessageDeflateFactory(server_no_context_takeover=True))
    assert "server_no_context_takeover" in lone
    small = ClientPerMessageDeflateFactory(server_max_window_bits=9)
    assert ws_messages(server, small) == ""  # a window below 10 bits is declined
    assert ws_messages(server, None) == ""


def read_chunk(sock_file) -> bytes:
    size = int(sock_file.readline().strip(), 16)
    data = sock_file.read(size + 2)[:-2]
    return data


@pytest.mark.parametrize(("kind", "framing"), [("sse", SSE), ("stream", NDJSON)])
def test_the_server_sends_the_schemes_bytes_each_message_alone_then_chained(
    shared_server, kind, framing
):
    """What the compressed conformance transcripts are built from (`tests.compressed`, the
    scheme of `pushserver.wire.compression`) is what the server sends: the gzip header with the
    stream's start in one chunk, then each message in a chunk of its own, a sync-flushed deflate
    block: the first on its own (the stream's start is the connection's own frame), the next
    chained to the one before."""
    channel = f"scheme-{kind}"
    with socket.create_connection(("127.0.0.1", shared_server.port), timeout=10) as sock:
        sock.sendall(
            f"GET /{kind}/{channel} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n".encode()
        )
        reader = sock.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += reader.readline()
        assert b"\r\nContent-Encoding: gzip\r\n" in head
        opening = read_chunk(reader)
        assert opening.startswith(GZIP_HEADER) and opening.endswith(SYNC_TAIL)
        inflate = zlib.decompressobj(31)
        start = inflate.decompress(opening)
        assert start == framing.comment(b"") + framing.start(
            json.loads(raw_get(shared_server, f"/lp/{channel}?timeout=0", {})[2])["cursor"].encode()
        )
        frames: list[bytes] = []
        for n in range(3):
            publish(shared_server, channel, n)
            block = read_chunk(reader)
            assert block.endswith(SYNC_TAIL)
            frames.append(inflate.decompress(block))
            assert frames[-1].count(b'"volume"') == 1  # decoded whole, at once
            expected = deflate(frames[-1], frames[-2] if n else b"")
            assert block == expected, n
