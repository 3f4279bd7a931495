"""The Python client's API against a real server: publishing, subscribing, typed errors."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp
import jwt
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pushclient import (
    TRANSPORT_NAMES,
    Backoff,
    BadRequest,
    Forbidden,
    Gap,
    InvalidChannel,
    InvalidURL,
    Message,
    PublishResult,
    PushClient,
    RetriesExhausted,
    ServiceUnavailable,
    Subscription,
    TokenExpired,
    Unauthorized,
)
from pushclient import sync as pushsync

from ...wire import wait_for_stats

FAST = Backoff(initial=0.02, maximum=0.2)
WAIT = 30.0

SECRET = "a-subscribe-secret-of-32-bytes-or-more"


async def take(subscription: Subscription, count: int) -> list[Message | Gap]:
    return [await asyncio.wait_for(anext(subscription), WAIT) for _ in range(count)]


async def test_pushclient_publish_returns_the_receipt(server):
    async with PushClient(server.url) as client:
        first = await client.publish("receipts", "hello")
        batch = await client.publish_many([("receipts", {"n": 1}), {"channel": "other", "data": 2}])
        info = await client.channel("receipts")
        assert await client.health() is True
    assert isinstance(first, PublishResult)
    assert (first.channel, first.id, first.subscribers) == ("receipts", 1, 0)
    assert first.ts == pytest.approx(time.time(), abs=60)
    assert [(r.channel, r.id) for r in batch] == [("receipts", 2), ("other", 1)]
    assert (info["last_id"], info["buffered"]) == (2, 2)


async def test_pushclient_data_round_trips_as_text_or_json(server):
    values = ["plain text", '{"looks": "like json"}', {"a": [1, 2.5, None]}, [1, "two"], 3, True]
    async with PushClient(server.url) as client:
        for value in values:
            await client.publish("shapes", value)
        async with client.subscribe("shapes", history=len(values)) as subscription:
            got = await take(subscription, len(values))
    assert [item.data for item in got] == values


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_subscribes_to_many_channels_and_resumes(server, transport):
    async with PushClient(server.url, backoff=FAST) as client:
        await client.publish("news", "n1")
        async with client.subscribe(
            ["news", "sports"], transport=transport, history=1
        ) as subscription:
            assert (await take(subscription, 1))[0].data == "n1"
            await client.publish_many([("sports", "s1"), ("news", "n2"), ("sports", "s2")])
            got = await take(subscription, 3)
            assert [(m.channel, m.id, m.data) for m in got] == [
                ("sports", 1, "s1"),
                ("news", 2, "n2"),
                ("sports", 2, "s2"),
            ]
            saved = subscription.cursor
        assert saved == got[-1].cursor
        # Later, another subscriber resumes from the saved cursor: only what came after it.
        await client.publish_many([("news", "n3"), ("sports", "s3")])
        async with client.subscribe(
            ["news", "sports"], transport=transport, cursor=saved
        ) as resumed:
            assert [m.data for m in await take(resumed, 2)] == ["n3", "s3"]


async def test_pushclient_publish_errors_are_typed(server_factory):
    server = server_factory("--publish-key", "sesame")
    async with PushClient(server.url) as anonymous:
        with pytest.raises(Unauthorized) as missing:
            await anonymous.publish("locked", "x")
    assert (missing.value.status, missing.value.code) == (401, "unauthorized")
    assert missing.value.message
    async with PushClient(server.url, publish_key="wrong") as wrong:
        with pytest.raises(Unauthorized):
            await wrong.publish("locked", "x")
    async with PushClient(server.url, publish_key="sesame") as client:
        assert (await client.publish("locked", "x")).id == 1
        with pytest.raises(BadRequest) as empty:
            await client.publish_many([])
        assert empty.value.status == 400
        with pytest.raises(InvalidChannel):
            await client.publish("no spaces allowed", "x")
        with pytest.raises(InvalidChannel):
            client.subscribe(["ok", "not/ok"])
    with pytest.raises(InvalidURL):
        PushClient("localhost:8080")


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_client_errors_are_final(server, transport):
    # Retrying forever is the default: a 4xx must still end the iteration at once.
    async with (
        PushClient(server.url, backoff=FAST) as client,
        client.subscribe("final", transport=transport, cursor="garbage") as subscription,
    ):
        with pytest.raises(BadRequest) as error:
            await asyncio.wait_for(anext(subscription), WAIT)
    assert error.value.status == 400
    if transport != "ws":  # a refused WebSocket handshake's body is not readable
        assert error.value.code == "bad_cursor"


async def test_pushclient_over_capacity_is_a_typed_retryable_error(server_factory):
    server = server_factory("--max-connections", "1", "--heartbeat", "1")
    # The holder retries: with one connection allowed, its own connections and /stats's take
    # turns (a kept-alive one may be closed to make room for a new one, docs/security.md).
    async with (
        PushClient(server.url, heartbeat=1, backoff=FAST) as holding_client,
        PushClient(server.url, heartbeat=1, max_retries=0) as client,
    ):
        await holding_client.publish("full", "x")
        async with holding_client.subscribe("full", history=1, transport="stream") as holder:
            assert (await take(holder, 1))[0].data == "x"
            holding = asyncio.create_task(anext(holder))  # holds the one connection
            async with aiohttp.ClientSession() as http:
                await wait_for_stats(
                    http, server.url, lambda s: s["connections"]["stream"] == 1, "the holder"
                )
            async with client.subscribe("full", transport="stream") as refused:
                with pytest.raises(RetriesExhausted) as gave_up:
                    await asyncio.wait_for(anext(refused), WAIT)
            holding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holding
    error = gave_up.value.last_error
    assert isinstance(error, ServiceUnavailable)
    assert (error.status, error.code) == (503, "over_capacity")
    assert error.retry_after is not None


async def test_pushclient_gives_up_when_told_with_the_last_cursor(server_factory):
    server = server_factory("--heartbeat", "1")
    async with PushClient(server.url, backoff=FAST, max_retries=3) as client:
        await client.publish("ending", "last words")
        async with client.subscribe("ending", history=1) as subscription:
            (last,) = await take(subscription, 1)
            await asyncio.to_thread(server.stop)
            with pytest.raises(RetriesExhausted) as gave_up:
                await asyncio.wait_for(anext(subscription), WAIT)
    assert gave_up.value.cursor == last.cursor
    assert gave_up.value.attempts == 4


async def test_pushclient_subscriber_tokens(server_factory):
    server = server_factory("--subscribe-secret", SECRET, "--heartbeat", "1")

    def token(ttl: float) -> str:
        claims = {"channels": ["tok.*"], "exp": time.time() + ttl}
        return jwt.encode(claims, SECRET, algorithm="HS256")

    async def until_expired(client: PushClient, transport: str) -> None:
        channel = f"tok.{transport}"
        await client.publish(channel, "inside")
        async with client.subscribe(
            channel, transport=transport, history=1, token=token(3)
        ) as subscription:
            (message,) = await take(subscription, 1)
            # A held stream is told and closed; a long-poll is refused at its next request.
            expected = Unauthorized if transport == "longpoll" else TokenExpired
            with pytest.raises(expected) as expired:
                await asyncio.wait_for(anext(subscription), WAIT)
            assert subscription.cursor == message.cursor
            if expected is TokenExpired:
                assert expired.value.cursor == message.cursor

    async with PushClient(server.url, backoff=FAST, poll_timeout=1) as client:
        with pytest.raises(Unauthorized):
            await take(client.subscribe("tok.a"), 1)
        with pytest.raises(Forbidden) as forbidden:
            await take(client.subscribe("other", token=token(60)), 1)
        assert forbidden.value.status == 403
        await asyncio.gather(*(until_expired(client, name) for name in TRANSPORT_NAMES))


ENVELOPE = {"channel": "busy", "id": 1, "ts": 1.0, "data": "finally", "cursor": "busy:e1:1"}


class BusyOnce:
    """A real HTTP server that answers the first subscribe 503 + Retry-After, then serves one
    message in the transport's own format."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self.arrivals: list[float] = []
        self.app = web.Application()
        self.app.router.add_get("/{kind}/{channels}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        if len(self.arrivals) == 1:
            return web.json_response(
                {"error": "over_capacity", "message": "too many connections"},
                status=503,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        body = orjson.dumps(ENVELOPE)
        kind = request.match_info["kind"]
        if kind == "lp":
            return web.json_response({"messages": [ENVELOPE], "cursor": ENVELOPE["cursor"]})
        if kind == "ws":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.send_bytes(body)
            await ws.close()
            return ws
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"data: " + body + b"\n\n" if kind == "sse" else body + b"\n")
        return response


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_honours_retry_after(transport):
    busy = BusyOnce(retry_after=1)
    async with TestServer(busy.app, host="127.0.0.1") as http:
        # Without Retry-After this backoff would retry within 10 ms.
        tight = Backoff(initial=0.01, maximum=0.01)
        url = str(http.make_url(""))
        async with (
            PushClient(url, heartbeat=5, backoff=tight) as client,
            client.subscribe("busy", transport=transport) as subscription,
        ):
            (item,) = await take(subscription, 1)
    assert item == Message("busy", 1, 1.0, "finally", "busy:e1:1")
    first, second = busy.arrivals[:2]
    assert second - first >= 0.9  # a lower bound: the client waited as told


def test_pushclient_sync_wrapper(server):
    receipt = pushsync.publish(server.url, "blocking", {"k": "v"})
    assert (receipt.channel, receipt.id) == ("blocking", 1)
    items = pushsync.subscribe(server.url, "blocking", history=1, transport="stream")
    try:
        first = next(items)
    finally:
        items.close()
    assert (first.id, first.data) == (1, {"k": "v"})
