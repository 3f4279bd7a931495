"""Real decoders read the server's compression scheme message by message.

`tests.compressed` builds gzip-encoded SSE and NDJSON streams and permessage-deflate WebSocket
messages exactly as `pushserver.wire.compression` does (frames alone, chained to the frame
before, chained across heartbeats, a connection's own frame, a frame after a missed one), and
`tests.lockstep` writes them one step at a time: each step only once the decoder has reported
the message of the step before. A decoder that waited for more bytes (a buffering gunzip, the
trailer) would never get them, and the test fails at its deadline.

Decoders: curl --compressed -N, Node's zlib and fetch, the JDK's GZIPInputStream on a socket,
Chromium's EventSource, fetch and WebSocket, the Python `websockets` client; and what each does
with a stream cut before its trailer, and with a trailer that does not match.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from websockets.sync.client import connect

from ...compressed import ACCEPT, CHANNEL, MULTI, Step, gzip_stream, websocket_frames
from ...lockstep import Held, Lines, Lockstep, wait_for
from ...system import ensure_command
from ..clients import test_browser_js

DECODERS = Path(__file__).parents[2] / "decoders"
PAGE = b"<!doctype html><title>decoders</title><script>window.got = [];</script>"


@dataclass
class Consumer:
    """A decoder reading one answer; `got` is what it reported, line by line."""

    got: Callable[[], list[str]]
    done: Callable[[], bool]
    stop: Callable[[], None] = field(default=lambda: None)

    def has(self, marker: str) -> bool:
        return any(marker in line for line in self.got())


def subprocess_consumer(args: list[str]) -> Consumer:
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=DECODERS
    )
    assert proc.stdout is not None
    lines = Lines(proc.stdout)

    def got() -> list[str]:
        return [*lines.lines, *([f"EXIT {proc.returncode}"] if proc.poll() is not None else [])]

    def stop() -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)

    return Consumer(got, lambda: proc.poll() is not None and not lines.thread.is_alive(), stop)


def java() -> str:
    return ensure_command("java", "default-jdk-headless")


node = test_browser_js.node


FETCH_LINES = """(url) => {
  (async () => {
    try {
      const res = await fetch(url);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let tail = '';
      for (;;) {
        const step = await reader.read();
        if (step.done) { window.got.push('END'); return; }
        tail += decoder.decode(step.value, { stream: true });
        let end;
        while ((end = tail.indexOf('\\n')) >= 0) {
          window.got.push(tail.slice(0, end));
          tail = tail.slice(end + 1);
        }
      }
    } catch (err) { window.got.push('ERROR ' + err); }
  })();
}"""
EVENT_SOURCE = """(url) => {
  const source = new EventSource(url);
  source.onmessage = (ev) => window.got.push(ev.lastEventId + ' ' + ev.data);
  source.onerror = () => { window.got.push('ERROR'); source.close(); };
}"""
WEBSOCKET = """(url) => {
  const ws = new WebSocket(url.replace(/^http/, 'ws'));
  ws.onmessage = (ev) => window.got.push(ev.data);
  ws.onclose = (ev) => window.got.push('CLOSE ' + ev.code);
}"""


def page_consumer(page: Page, script: str, url: str) -> Consumer:
    page.evaluate(script, url)

    def got() -> list[str]:
        return list(page.evaluate("window.got"))

    def done() -> bool:
        return any(line.split(" ")[0] in ("END", "ERROR", "CLOSE") for line in got())

    return Consumer(got, done)


browser = test_browser_js.browser
"""One headless Chromium for the module, as the JS client's browser tests start it."""


@pytest.fixture
def lockstep() -> Iterator[Lockstep]:
    with Lockstep({"/": ("text/html", PAGE)}) as server:
        yield server


@pytest.fixture
def page(browser: Browser, lockstep: Lockstep) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.goto(lockstep.url + "/")
    yield page
    context.close()


HTTP_DECODERS = ["curl", "node-zlib", "node-fetch", "jdk", "chromium-fetch", "chromium-eventsource"]


def start(decoder: str, kind: str, url: str, page: Page | None) -> Consumer:
    accept = ACCEPT[kind]
    if decoder == "curl":
        curl = ensure_command("curl", "curl")
        return subprocess_consumer(
            [curl, "-sS", "-N", "--compressed", "-H", f"Accept: {accept}", url]
        )
    if decoder.startswith("node-"):
        return subprocess_consumer([node(), "lines.mjs", decoder[5:], url, accept])
    if decoder == "jdk":
        return subprocess_consumer([java(), "GzipLines.java", url, accept])
    assert page is not None
    script = EVENT_SOURCE if decoder == "chromium-eventsource" else FETCH_LINES
    return page_consumer(page, script, url)


def serve(held: Held, head: bytes, steps: list[Step], consumer: Consumer, name: str) -> None:
    """Each step once the consumer has reported the message of the one before."""
    held.send(head + steps[0].data)
    for step in steps[1:]:
        held.send(step.data)
        if step.marker is not None:
            wait_for(f"{name} to report {step.marker}", lambda m=step.marker: consumer.has(m))


def run(decoder: str, kind: str, ending: str, lockstep: Lockstep, page: Page | None) -> Consumer:
    head, steps, end = gzip_stream(kind)
    consumer = start(decoder, kind, f"{lockstep.url}/{kind}/{CHANNEL}", page)
    try:
        held = lockstep.next()
        assert "gzip" in held.headers.get("accept-encoding", ""), held.headers
        serve(held, head, steps, consumer, decoder)
        if ending == "cut":
            held.abort()
        else:
            if ending == "bad-trailer":  # a CRC-32 off by one bit
                at = end.index(b"\r\n") + 2 + 2
                end = end[:at] + bytes([end[at] ^ 1]) + end[at + 1 :]
            held.send(end)
            held.close()
        wait_for(f"{decoder} to end", consumer.done)
        return consumer
    finally:
        consumer.stop()


def outcome(consumer: Consumer) -> str:
    """The first error the decoder reported, else END (the body was read whole)."""
    lines = consumer.got()
    errors = [line for line in lines if line.startswith(("ERROR", "curl:", "EXIT"))]
    errors = [line for line in errors if line != "EXIT 0"]
    return errors[0] if errors else "END"


@pytest.mark.parametrize(
    ("decoder", "kind"),
    [(d, k) for d in HTTP_DECODERS for k in ACCEPT if (d, k) != ("chromium-eventsource", "stream")],
)
def test_each_message_is_read_as_it_arrives_and_the_trailer_checks(decoder, kind, lockstep, page):
    consumer = run(decoder, kind, "trailer", lockstep, page)
    if decoder == "chromium-eventsource":
        assert consumer.got()[-1] == "ERROR"  # an ended stream is an error to EventSource
    else:
        assert outcome(consumer) == "END", consumer.got()


@pytest.mark.parametrize("decoder", HTTP_DECODERS)
def test_a_stream_cut_before_its_trailer_delivered_everything_and_fails(decoder, lockstep, page):
    consumer = run(decoder, "sse", "cut", lockstep, page)
    assert consumer.has(f"{CHANNEL}:70f05dee1:6")
    assert outcome(consumer) != "END", consumer.got()


@pytest.mark.parametrize("decoder", ["curl", "node-zlib", "node-fetch", "jdk"])
def test_these_decoders_check_the_trailer(decoder, lockstep):
    """So the trailer `GzipStream.end` writes is checked for real by them: a wrong one fails."""
    consumer = run(decoder, "stream", "bad-trailer", lockstep, None)
    assert consumer.has(f"{CHANNEL}:70f05dee1:6")
    assert outcome(consumer) != "END", consumer.got()


# -- WebSocket permessage-deflate -----------------------------------------------------------


def serve_websocket(held: Held, consumer: Consumer, name: str) -> None:
    offers = held.headers.get("sec-websocket-extensions", "")
    answer, steps = websocket_frames(offers)
    held.websocket_accept(answer)
    serve(held, b"", steps, consumer, name)
    held.send(b"\x88\x02\x03\xe8")  # close 1000


def test_chromium_reads_chained_websocket_messages(lockstep, page):
    consumer = page_consumer(page, WEBSOCKET, f"{lockstep.url}/ws/{CHANNEL}")
    held = lockstep.next()
    assert "permessage-deflate" in held.headers["sec-websocket-extensions"]
    serve_websocket(held, consumer, "Chromium")
    wait_for("Chromium's close", lambda: consumer.has("CLOSE 1000"))
    held.close()


def test_the_websockets_client_reads_chained_websocket_messages(lockstep):
    got: list[str] = []
    consumer = Consumer(lambda: got, lambda: True)

    def client() -> None:
        with connect(f"{lockstep.url.replace('http', 'ws')}/ws/{CHANNEL}") as ws:
            for message in ws:
                got.append(str(message))

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    held = lockstep.next()
    serve_websocket(held, consumer, "websockets")
    thread.join(10)
    held.close()
    assert [json.loads(m)["cursor"] for m in got][-1] == f"{CHANNEL}:70f05dee1:6"


def test_the_jdk_websocket_client_offers_no_compression(lockstep):
    """java.net.http.WebSocket sends no permessage-deflate offer, so it gets plain frames."""
    consumer = subprocess_consumer(
        [java(), "WsOffer.java", f"{lockstep.url.replace('http', 'ws')}/ws/x"]
    )
    try:
        held = lockstep.next()
        assert "sec-websocket-extensions" not in held.headers, held.headers
        held.websocket_accept(None)
        held.send(b"\x81\x05hello\x88\x02\x03\xe8")
        wait_for("the JDK client to close", lambda: consumer.has("CLOSE 1000"))
        assert consumer.has("hello")
        held.close()
    finally:
        consumer.stop()


# -- the JavaScript client in Chromium ------------------------------------------------------

JS_DIST = Path(__file__).resolve().parents[3] / "clients" / "js" / "dist"
CLIENT_PAGE = (
    b"<!doctype html><title>client</title><script src='/pushclient.classic.js'></script>"
    b"<script>window.got = [];</script>"
)
SUBSCRIBE = """(options) => {
  window.sub = new PushClient.PushSubscription(location.origin, ['prices.AAPL'], {
    cursor: 'prices.AAPL:70f05dee1:0',
    minDelay: 60000,
    onMessage: (m) => window.got.push(JSON.stringify(m)),
    ...options,
  });
}"""


@pytest.mark.parametrize("reader", ["eventsource", "fetch"])
def test_the_js_client_reads_compact_gzip_sse_message_by_message(reader, browser):
    """It asks for the compact framing; Chromium inflates, EventSource (or the client's own SSE
    parser on fetch) hands over each message as it arrives."""
    subprocess.run([node(), "build.mjs"], cwd=JS_DIST.parent, check=True)
    script = (JS_DIST / "pushclient.classic.js").read_bytes()
    pages = {"/": ("text/html", CLIENT_PAGE), "/pushclient.classic.js": ("text/javascript", script)}
    with Lockstep(pages) as server:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(server.url + "/")
            options = {"transport": "sse", **({"EventSource": False} if reader == "fetch" else {})}
            page.evaluate(SUBSCRIBE, options)
            consumer = Consumer(lambda: list(page.evaluate("window.got")), lambda: True)
            held = server.next()
            assert held.query.get("compact") == "1", held.target
            head, steps, end = gzip_stream("sse-compact")
            serve(held, head, steps, consumer, f"the client over {reader}")
            held.send(end)
            got = [json.loads(m) for m in consumer.got()]
            assert [m["id"] for m in got] == [1, 2, 3, 4, 5, 6]
            assert {m["channel"] for m in got} == {CHANNEL} and {m["ts"] for m in got} == {None}
            assert got[3]["cursor"] == MULTI and got[0]["data"]["symbol"] == "AAPL"
            page.evaluate("window.sub.close()")
            held.close()
        finally:
            context.close()
