"""Subscriber tokens: every refusal is the JSON error, prefixes work, held streams end at expiry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import aiohttp
import jwt
import orjson
import pytest

from pushserver.core.tokens import mint
from pushserver.launcher import ServerProcess

SECRET = "test-subscribe-secret-" + "0123456789abcdef" * 3
ALL_KINDS = ("lp", "stream", "sse", "ws")


@pytest.fixture(scope="module")
def secured():
    with ServerProcess(["--subscribe-secret", SECRET, "--heartbeat", "1"]) as srv:
        yield srv


async def _status(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, orjson.loads(await resp.read())


def _forged(claims: dict, secret: str = SECRET) -> str:
    return jwt.encode(claims, secret, algorithm="HS256")


@pytest.mark.parametrize(
    ("make_token", "status", "code"),
    [
        (lambda: None, 401, "unauthorized"),
        (lambda: "not-a-jwt", 401, "unauthorized"),
        (lambda: "a.b.c", 401, "unauthorized"),
        (lambda: mint(["news"], 60, "another-secret-0123456789abcdefgh"), 401, "unauthorized"),
        (lambda: mint(["news"], -10, SECRET), 401, "unauthorized"),
        (lambda: _forged({"channels": ["news"]}), 401, "unauthorized"),
        (lambda: _forged({"exp": int(time.time()) + 60}), 401, "unauthorized"),
        (
            lambda: _forged({"channels": "news", "exp": int(time.time()) + 60}),
            401,
            "unauthorized",
        ),
        (
            lambda: jwt.encode(
                {"channels": ["news"], "exp": int(time.time()) + 60}, SECRET, "HS512"
            ),
            401,
            "unauthorized",
        ),
        (lambda: mint(["sports", "new*"], 60, SECRET), 200, None),
        (lambda: mint(["sports"], 60, SECRET), 403, "forbidden"),
        (lambda: mint(["news.*"], 60, SECRET), 403, "forbidden"),
    ],
    ids=[
        "missing",
        "garbage",
        "malformed",
        "wrong-secret",
        "expired",
        "no-exp",
        "no-channels",
        "channels-not-list",
        "other-algorithm",
        "prefix-allows",
        "not-allowed",
        "prefix-not-matching",
    ],
)
async def test_longpoll_token_checks(secured, make_token, status, code):
    token = make_token()
    query = "timeout=0" + (f"&token={token}" if token is not None else "")
    got, body = await _status(f"{secured.url}/lp/news?{query}")
    assert got == status, body
    if code is not None:
        assert body["error"] == code and body["message"]
    else:
        assert body["messages"] == []


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_every_transport_refuses_without_token(secured, kind):
    got, body = await _status(f"{secured.url}/{kind}/news")
    assert (got, body["error"]) == (401, "unauthorized")
    token = mint(["news"], 60, SECRET)
    got, body = await _status(f"{secured.url}/{kind}/news,user.7?token={token}")
    assert (got, body["error"]) == (403, "forbidden")


async def test_prefix_covers_many_channels(secured):
    token = mint(["user.42.*", "news"], 60, SECRET)
    got, _ = await _status(
        f"{secured.url}/lp/user.42.inbox,user.42.alerts,news?timeout=0&token={token}"
    )
    assert got == 200
    got, body = await _status(f"{secured.url}/lp/user.43.inbox?timeout=0&token={token}")
    assert (got, body["error"]) == (403, "forbidden")


async def _publish_until_closed(url: str, channel: str, done: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as http:
        while not done.is_set():
            async with http.post(f"{url}/pub/{channel}", json={"n": 1}) as resp:
                assert resp.status == 201
            await asyncio.sleep(0.2)


async def _expired_disconnects(url: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/stats") as resp:
        return (await resp.json())["disconnects"].get("expired", 0)


async def test_stream_gets_expired_event_and_is_closed(secured):
    before = await _expired_disconnects(secured.url)
    token = mint(["news"], 2, SECRET)
    done = asyncio.Event()
    publisher = asyncio.create_task(_publish_until_closed(secured.url, "news", done))
    events = []
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{secured.url}/stream/news?token={token}") as resp,
            asyncio.timeout(20),
        ):
            assert resp.status == 200
            async for line in resp.content:
                if line.strip():
                    events.append(orjson.loads(line))
    finally:
        done.set()
        await publisher
    assert events[-1] == {"type": "expired"}
    assert any(e.get("channel") == "news" for e in events[:-1])
    assert await _expired_disconnects(secured.url) == before + 1


async def test_sse_and_websocket_expire(secured):
    async with aiohttp.ClientSession() as http:
        token = mint(["news"], 2, SECRET)
        async with http.get(f"{secured.url}/sse/news?token={token}") as resp:
            async with asyncio.timeout(20):
                body = await resp.read()
        assert b'data: {"type":"expired"}' in body
        token = mint(["news"], 2, SECRET)
        async with http.ws_connect(f"{secured.url}/ws/news?token={token}") as ws:
            async with asyncio.timeout(20):
                frames = [msg async for msg in ws]
        assert orjson.loads(frames[-1].data) == {"type": "expired"}
        assert ws.close_code == aiohttp.WSCloseCode.POLICY_VIOLATION


async def test_long_lived_token_outlives_short_one(secured):
    """Expiry of one subscriber leaves the others (one timer for all) untouched."""
    short, long = mint(["news"], 2, SECRET), mint(["news"], 3600, SECRET)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{secured.url}/stream/news?token={long}") as keeper,
    ):
        async with http.get(f"{secured.url}/stream/news?token={short}") as brief:
            async with asyncio.timeout(20):
                await brief.read()
        async with (
            aiohttp.ClientSession() as pub,
            pub.post(f"{secured.url}/pub/news", json="after") as resp,
        ):
            assert resp.status == 201
        async with asyncio.timeout(20):
            while True:
                line = await keeper.content.readline()
                if line.strip():
                    event = orjson.loads(line)
                    break
    assert event["data"] == "after"


async def _poll(url: str) -> dict:
    """A long-poll's answer, plain or JSONP (`cb(...);`)."""
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200
        body = await resp.read()
    return orjson.loads(body.removeprefix(b"cb(").removesuffix(b");"))


@pytest.mark.parametrize("callback", ["", "&callback=cb"], ids=["direct", "awaited"])
async def test_longpoll_does_not_outlive_its_token(secured, callback):
    """Held with timeout=8 on a token that expires in 2 s: answered with its cursor at expiry,
    so a message published after that is not handed to it."""
    channel = f"expiring{len(callback)}"
    token = mint([channel], 2, SECRET)
    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    start = await _poll(f"{secured.url}/lp/{channel}?timeout=0&token={token}")
    query = f"timeout=8&cursor={start['cursor']}&token={token}{callback}"
    poll = asyncio.create_task(_poll(f"{secured.url}/lp/{channel}?{query}"))
    await asyncio.wait({poll}, timeout=max(0.0, exp - time.time()) + 0.5)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{secured.url}/pub/{channel}", json="late") as resp:
            assert resp.status == 201
        answer = await poll
        assert answer == {"messages": [], "cursor": start["cursor"]}
        got, body = await _status(f"{secured.url}/lp/{channel}?timeout=0&token={token}")
    assert (got, body["message"]) == (401, "subscribe token expired")


async def test_token_with_audience_needs_the_setting(secured):
    token = _forged({"channels": ["news"], "exp": int(time.time()) + 60, "aud": "push.example"})
    got, body = await _status(f"{secured.url}/lp/news?timeout=0&token={token}")
    assert got == 401 and "--token-audience" in body["message"]


async def test_token_audience_must_match(server_factory):
    srv = server_factory("--subscribe-secret", SECRET, "--token-audience", "push.example")
    exp = int(time.time()) + 60
    cases = [
        ({"aud": "push.example"}, 200),
        ({"aud": ["other.example", "push.example"]}, 200),
        ({"aud": "other.example"}, 401),
        ({}, 401),
    ]
    for extra, status in cases:
        token = _forged({"channels": ["news"], "exp": exp, **extra})
        got, body = await _status(f"{srv.url}/lp/news?timeout=0&token={token}")
        assert got == status, (extra, body)
        if status == 401:
            assert "aud" in body["message"], body


def test_token_subcommand_mints_a_working_token(secured):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushserver",
            "token",
            "--channels",
            "news,user.42.*",
            "--ttl",
            "60",
        ],
        env={"PUSHSERVER_SUBSCRIBE_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    token = out.stdout.strip()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["channels"] == ["news", "user.42.*"]
    assert 0 < claims["exp"] - time.time() <= 61
    got, _ = asyncio.run(_status(f"{secured.url}/lp/user.42.x?timeout=0&token={token}"))
    assert got == 200


def test_token_subcommand_needs_a_secret():
    out = subprocess.run(
        [sys.executable, "-m", "pushserver", "token", "--channels", "news"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "PUSHSERVER_SUBSCRIBE_SECRET" in out.stderr
