"""The JavaScript client in a real headless Chromium, every transport, both builds.

The page and the API share one origin: `clients/js/demo/server.mjs` serves `clients/js/` and
reverse-proxies the API (streams and WebSocket upgrades unbuffered) to the pushserver, so the
test needs no CORS. Its `/buffered/` prefix buffers whole responses and refuses upgrades, which
is how the test puts a buffering proxy in front of the browser.

The lossy-link runs subscribe from that page to another origin: a server with CORS behind the
cutting proxy of `tests.lossy`, so JSONP and XHR meet real cut-off bodies.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, sync_playwright

from pushserver.launcher import ServerProcess

from ... import lossy
from ...system import ensure_command
from ...tcpproxy import TcpProxy

JS_DIR = Path(__file__).resolve().parents[3] / "clients" / "js"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COUNT = 500


def chromium_path() -> str:
    """Debian's chromium; installed here when missing rather than skipping the test."""
    return ensure_command("chromium", "chromium")


def node() -> str:
    path = shutil.which("node")
    assert path, "Node.js is not installed"
    return path


@pytest.fixture(scope="module")
def pushserver() -> Iterator[ServerProcess]:
    with ServerProcess(["--heartbeat", "1", "--history-size", "2000"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def origin(pushserver: ServerProcess) -> Iterator[str]:
    """Builds the client, then starts the same-origin static server and API proxy."""
    subprocess.run([node(), "build.mjs"], cwd=JS_DIR, check=True)
    proc = subprocess.Popen(
        [node(), "demo/server.mjs", "--upstream", pushserver.url, "--port", "0"],
        cwd=JS_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (http://\S+)", line)
    try:
        assert match, f"demo server did not start: {line!r}"
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


_counter = iter(range(1_000_000))


def fresh_channel(name: str) -> str:
    return f"browser-{name}-{os.getpid()}-{next(_counter)}"


# (build, transport, extra options, URL prefix, transport expected at the end)
RUNS: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("esm", "auto", {}, "", "ws"),
    ("classic", "auto", {}, "", "ws"),
    ("classic", "sse", {}, "", "sse"),
    ("classic", "stream", {}, "", "stream"),
    ("classic", "longpoll", {}, "", "longpoll"),
    ("classic", "ws", {}, "", "ws"),
    ("classic", "jsonp", {}, "", "jsonp"),
    ("classic", "stream", {"fetch": False}, "", "stream"),
    ("classic", "longpoll", {"fetch": False}, "", "longpoll"),
    ("classic", "stream", {"fetch": False, "xhrMaxBytes": 10_000}, "", "stream"),
    ("esm", "auto", {}, "/buffered", "longpoll"),
    ("classic", "auto", {"fetch": False}, "/buffered", "longpoll"),
]


@pytest.mark.parametrize(
    ("build", "transport", "options", "prefix", "expected"),
    RUNS,
    ids=[
        f"{b}-{t}"
        + ("-xhr" if "fetch" in o else "")
        + ("-renewed" if "xhrMaxBytes" in o else "")
        + ("-behind-buffering-proxy" if p else "")
        for b, t, o, p, _ in RUNS
    ],
)
def test_every_message_arrives_in_order(
    page: Page,
    origin: str,
    build: str,
    transport: str,
    options: dict[str, Any],
    prefix: str,
    expected: str,
) -> None:
    page.goto(f"{origin}/test/browser.html")
    page.wait_for_function("window.harnessReady === true")
    result = page.evaluate(
        "args => window.runTransport(args)",
        {
            "build": build,
            "base": prefix,
            "channel": fresh_channel(transport),
            "count": COUNT,
            "options": {"transport": transport, **options},
        },
    )
    assert result["values"] == list(range(1, COUNT + 1)), result["statuses"]
    assert result["ids"] == list(range(1, COUNT + 1))
    assert result["gaps"] == 0
    assert result["transport"] == expected
    assert result["cursorMatches"]
    assert result["jsonpScriptsLeft"] == 0
    fallbacks = [s.split(":")[1] for s in result["statuses"] if s.startswith("fallback")]
    if prefix:
        # WebSocket upgrades are refused; the next stream never shows a heartbeat.
        assert fallbacks == ["sse" if options.get("fetch") is False else "stream", "longpoll"]
    else:
        assert fallbacks == []
    renewals = result["statuses"].count("reconnecting:stream:rotate")
    assert renewals >= 1 if "xhrMaxBytes" in options else renewals == 0, result["statuses"]


def publish(base: str, channel: str, data: object) -> None:
    request = urllib.request.Request(
        f"{base}/pub/{channel}",
        data=json.dumps(data).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def test_demo_page_shows_live_messages_and_publishes(
    page: Page, origin: str, pushserver: ServerProcess, tmp_path: Path
) -> None:
    channel = fresh_channel("demo")
    page.set_viewport_size({"width": 900, "height": 640})
    page.goto(f"{origin}/demo/?channel={channel}")
    page.wait_for_function("document.getElementById('status').textContent.indexOf('live') === 0")
    for text in ["Breaking: pushserver demo is live", {"price": 42, "symbol": "ACME"}]:
        publish(pushserver.url, channel, text)
    page.fill("#message", "hello from the publish box")
    page.click("#send")
    items = page.locator("#messages li")
    items.nth(2).wait_for()
    texts = items.locator(".data").all_inner_texts()
    assert texts == [
        "hello from the publish box",
        '{"price":42,"symbol":"ACME"}',
        "Breaking: pushserver demo is live",
    ]
    assert page.input_value("#message") == ""
    shot = tmp_path / "demo.png"
    page.screenshot(path=str(shot), full_page=True)
    with Image.open(shot) as image:
        assert image.size[0] >= 900
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 50, "the screenshot looks blank"
    if os.environ.get("PUSHCLIENT_SCREENSHOT"):
        shutil.copy(shot, os.environ["PUSHCLIENT_SCREENSHOT"])


@contextmanager
def event_loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop on its own thread, for the asyncio proxy and publisher beside sync Playwright."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


LOSSY_RUNS: list[tuple[str, dict[str, Any]]] = [
    ("jsonp", {}),
    ("longpoll", {}),
    ("longpoll", {"fetch": False}),
    ("stream", {}),
    ("stream", {"fetch": False}),
    ("sse", {}),
    ("ws", {}),
]


@pytest.mark.parametrize(
    ("transport", "options"),
    LOSSY_RUNS,
    ids=[t + ("-xhr" if "fetch" in o else "") for t, o in LOSSY_RUNS],
)
def test_lossy_link_delivers_every_message_once_in_order(
    page: Page, origin: str, transport: str, options: dict[str, Any]
) -> None:
    """Through a proxy that cuts every connection after 300-3,000 bytes, 300 messages published
    at ~100/s arrive once and in order within 60 s."""
    page.goto(f"{origin}/test/browser.html")
    page.wait_for_function("window.harnessReady === true")
    server_args = ["--history-size", str(lossy.HISTORY), "--cors-origin", "*", "--heartbeat", "1"]
    with ServerProcess(server_args) as server, event_loop_thread() as loop:

        def run(coro: Coroutine[Any, Any, Any]) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, loop).result(90)

        proxy = run(TcpProxy(server.port, cut_after=lossy.random_cuts(seed=1)).start())
        cursor = run(lossy.head_cursor(server.url))
        started = time.monotonic()
        publishing = asyncio.run_coroutine_threadsafe(lossy.publish_all(server.url), loop)
        result = page.evaluate(
            "args => window.receive(args)",
            {
                "base": proxy.url,
                "channel": lossy.CHANNEL,
                "cursor": cursor,
                "count": lossy.MESSAGES,
                "deadlineMs": 60_000,
                "options": {"transport": transport, **options},
            },
        )
        seconds = time.monotonic() - started
        publishing.result(60)
        run(proxy.close())
    assert lossy.problems(result["events"]) == [], result["statuses"]
    assert result["transport"] == transport
    assert proxy.cuts > 0
    print(f"lossy link, browser {transport}{'-xhr' if options else ''}: {seconds:.2f} s")


EVENT_SOURCE = """async ({ url, count, deadlineMs }) => {
  const ids = [];
  const empty = [];
  let errors = 0;
  const source = new EventSource(url);
  return await new Promise((resolve) => {
    const done = () => { source.close(); resolve({ ids, empty, errors }); };
    const timer = setTimeout(done, deadlineMs);
    source.onerror = () => { errors += 1; };
    source.onmessage = (event) => {
      if (!event.data) { empty.push(event.lastEventId); return; }
      ids.push(JSON.parse(event.data).id);
      if (ids.length >= count) { clearTimeout(timer); done(); }
    };
  });
}"""


def test_native_event_source_resumes_through_cuts_from_a_url_cursor(
    page: Page, origin: str
) -> None:
    """A plain EventSource opened on `/sse/ch?cursor=C` behind a proxy that cuts every connection
    after 900 bytes (head included; the stream comes gzipped): each reconnect sends the URL's old
    cursor and a newer Last-Event-ID, and every message arrives once, in order; the id-only
    event each stream starts with dispatches nothing."""
    page.goto(f"{origin}/test/browser.html")
    count = 150
    channel = fresh_channel("eventsource")
    server_args = ["--history-size", "1000", "--cors-origin", "*", "--heartbeat", "1"]
    with ServerProcess(server_args) as server, event_loop_thread() as loop:
        with urllib.request.urlopen(f"{server.url}/lp/{channel}?timeout=0", timeout=10) as r:
            cursor = json.loads(r.read())["cursor"]
        for n in range(count):
            publish(server.url, channel, n)
        proxy = asyncio.run_coroutine_threadsafe(
            TcpProxy(server.port, cut_after=lambda: 900).start(), loop
        ).result(10)
        result = page.evaluate(
            EVENT_SOURCE,
            {
                "url": f"{proxy.url}/sse/{channel}?cursor={cursor}",
                "count": count,
                "deadlineMs": 40_000,
            },
        )
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
    assert result["ids"] == list(range(1, count + 1))
    assert result["empty"] == []
    assert proxy.cuts >= 2 and result["errors"] >= 2
