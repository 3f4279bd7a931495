"""Resuming from a cursor: nothing lost, nothing repeated; loss announced as a gap."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import aiohttp
import pytest
from yarl import URL

from ...wire import TRANSPORTS, Subscriber, publish, publish_batch, take
from .test_core_transports import head_cursor


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_resume_after_disconnect_mid_run(server, transport):
    """The test closes the subscriber's connection while messages keep coming."""
    total = 300
    async with aiohttp.ClientSession() as s:
        sub = Subscriber(
            s, server.url, transport, "r", cursor=await head_cursor(s, server.url, "r")
        )

        async def publisher() -> None:
            for n in range(total):
                await publish(s, server.url, "r", n)

        pub = asyncio.create_task(publisher())
        received: list[int] = []
        while len(received) < total:
            await sub.connect()
            want = min(40, total - len(received))
            events = await take(sub, want)
            received += [e["data"] for e in events]
            await sub.close()  # cut mid-run; resume from sub.cursor
        await pub
    assert received == list(range(total))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cursor_older_than_history_gives_gap(server_factory, transport):
    srv = server_factory("--history-size", "5")
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, srv.url, "g")
        await publish_batch(s, srv.url, [{"channel": "g", "data": n} for n in range(12)])
        sub = Subscriber(s, srv.url, transport, "g", cursor=cursor)
        await sub.connect()
        events = await take(sub, 6)
        await sub.close()
    gap, *messages = events
    assert gap["type"] == "gap"
    assert (gap["channel"], gap["from"], gap["to"], gap["reason"]) == ("g", 1, 7, "expired")
    assert gap["cursor"].endswith(":7")
    assert [m["id"] for m in messages] == [8, 9, 10, 11, 12]


async def test_history_ttl_expires_messages(server_factory):
    srv = server_factory("--history-ttl", "0.3")
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, srv.url, "ttl")
        await publish(s, srv.url, "ttl", "old")
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            async with s.get(f"{srv.url}/channels/ttl") as r:
                if (await r.json())["buffered"] == 0:
                    break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        await publish(s, srv.url, "ttl", "new")
        sub = Subscriber(s, srv.url, "longpoll", "ttl", cursor=cursor)
        events = await take(sub, 2)
    assert events[0]["type"] == "gap" and events[0]["reason"] == "expired"
    assert (events[0]["from"], events[0]["to"]) == (1, 1)
    assert events[1]["data"] == "new"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cursor_from_previous_run_gives_epoch_gap(server_factory, transport):
    srv = server_factory()
    async with aiohttp.ClientSession() as s:
        await publish(s, srv.url, "e", "before")
        cursor = await head_cursor(s, srv.url, "e")
    srv.restart()
    async with aiohttp.ClientSession() as s:
        await publish(s, srv.url, "e", "after restart")
        sub = Subscriber(s, srv.url, transport, "e", cursor=cursor)
        await sub.connect()
        gap, message = await take(sub, 2)
        await sub.close()
    assert gap["type"] == "gap" and gap["reason"] == "epoch" and gap["channel"] == "e"
    assert gap["cursor"].split(":")[1] != cursor.split(":")[1]
    assert message["data"] == "after restart" and message["id"] == 1


async def first_sse_event(response: aiohttp.ClientResponse) -> tuple[bytes, bytes]:
    """The `id:` and `data:` lines of the first event, skipping comments."""
    event_id = b""
    while True:
        line = await response.content.readline()
        if line.startswith(b"id: "):
            event_id = line
        elif line.startswith(b"data: "):
            return event_id, line


async def test_sse_last_event_id_and_cursor_precedence(server):
    async with aiohttp.ClientSession() as s:
        start = await head_cursor(s, server.url, "le")
        for n in range(3):
            await publish(s, server.url, "le", n)
        async with s.get(f"{server.url}/lp/le", params={"cursor": start}) as r:
            first = (await r.json())["messages"][0]["cursor"]
        async with s.get(f"{server.url}/sse/le", headers={"Last-Event-ID": first}) as r:
            event_id, data = await first_sse_event(r)
        assert event_id.startswith(b"id: ") and b'"data":1' in data
        async with s.get(  # an EventSource reconnecting to a URL that holds an older cursor
            f"{server.url}/sse/le", params={"cursor": start}, headers={"Last-Event-ID": first}
        ) as r:
            event_id, data = await first_sse_event(r)
        assert b'"data":1' in data
        async with s.get(
            f"{server.url}/sse/le", params={"cursor": ""}, headers={"Last-Event-ID": first}
        ) as r:
            event_id, data = await first_sse_event(r)
        assert b'"data":1' in data
        async with s.get(  # an empty Last-Event-ID is as if not given
            f"{server.url}/sse/le", params={"cursor": start}, headers={"Last-Event-ID": ""}
        ) as r:
            event_id, data = await first_sse_event(r)
        assert b'"data":0' in data


async def sse_start_id(response: aiohttp.ClientResponse) -> bytes:
    """The cursor of the `id:`-only event a stream starts with, after its padding comment."""
    assert await response.content.readline() == b":\n"
    assert await response.content.readline() == b"\n"
    line = await response.content.readline()
    assert line.startswith(b"id: ") and await response.content.readline() == b"\n", line
    return line[4:].rstrip(b"\n")


@pytest.mark.parametrize("channels", ["sa", "sa,sb"])
async def test_sse_start_id_resumes_a_stream_dropped_before_its_first_message(server, channels):
    """What EventSource does: a stream opened with no cursor drops before any message; the
    browser reconnects with the start `id:` as Last-Event-ID and loses nothing."""
    async with aiohttp.ClientSession() as s:
        await publish(s, server.url, "sa", "before")
        async with s.get(f"{server.url}/sse/{channels}") as r:
            start = await sse_start_id(r)
        assert start == (await head_cursor(s, server.url, channels)).encode()
        await publish(s, server.url, "sa", "missed")
        async with s.get(
            f"{server.url}/sse/{channels}", headers={"Last-Event-ID": start.decode()}
        ) as r:
            assert await sse_start_id(r) == start
            event_id, data = await first_sse_event(r)
        assert b'"data":"missed"' in data
        assert event_id.startswith(b"id: ") and event_id != b"id: " + start + b"\n"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_longest_subscription_resumes_from_its_cursor(server, transport):
    """64 channels of 128 characters, all `:` and `@`: the URL and its cursor (percent-encoded,
    as browsers send it) fit the default head limits, on every transport; SSE's Last-Event-ID
    too."""
    names = [f"{n:07b}".translate({48: ":", 49: "@"}).ljust(128, ":") for n in range(64)]
    channels = ",".join(names)
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, channels)
        await publish(s, server.url, names[-1], "after the cursor")
        sub = Subscriber(s, server.url, transport, channels, cursor=cursor)
        await sub.connect()
        [event] = await take(sub, 1)
        await sub.close()
        assert event["data"] == "after the cursor"
        if transport == "longpoll":  # as encodeURIComponent sends it: every : and , as %XX
            target = f"{server.url}/lp/{channels}?timeout=0&cursor={quote(cursor, safe='')}"
            async with s.get(URL(target, encoded=True)) as r:
                assert r.status == 200
                assert [m["data"] for m in (await r.json())["messages"]] == ["after the cursor"]
        if transport == "sse":
            async with s.get(
                f"{server.url}/sse/{channels}", headers={"Last-Event-ID": event["cursor"]}
            ) as r:
                assert r.status == 200
                await publish(s, server.url, names[0], "after the Last-Event-ID")
                _, data = await first_sse_event(r)
            assert b"after the Last-Event-ID" in data
