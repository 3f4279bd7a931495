"""A new stream's backlog obeys `--max-buffer-bytes`: written in slices as the client reads,
never held whole for a client that does not read; a reading client gets it all exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...inprocess import get
from ...wire import Subscriber, publish_batch, take, wait_for_stats

CHANNELS = ",".join(f"c{i}" for i in range(64))
PAYLOAD = "x" * 8000
HISTORY = 100
STALLED = 8


def backlog_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(
        "--history-size", str(HISTORY), "--max-message-bytes", str(1 << 20), "--heartbeat", "1"
    )


async def fill_history(s: aiohttp.ClientSession, base: str) -> None:
    """64 channels x 100 messages of 8 KB: a 51 MB backlog for `?history=100`."""
    for i in range(64):
        await publish_batch(s, base, [{"channel": f"c{i}", "data": PAYLOAD}] * HISTORY)


async def test_stalled_subscribers_do_not_hold_their_backlog(server_factory):
    server = backlog_server(server_factory)
    stalled: list[asyncio.StreamWriter] = []
    async with aiohttp.ClientSession() as s:
        await fill_history(s, server.url)
        before = await wait_for_stats(s, server.url, lambda st: True, "stats")
        for _ in range(STALLED):
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(get(f"/stream/{CHANNELS}?history={HISTORY}"))
            stalled.append(writer)  # never read from
        after = await wait_for_stats(
            s, server.url, lambda st: st["connections"]["stream"] == STALLED, "stalled streams"
        )
        grown = after["rss_bytes"] - before["rss_bytes"]
        # Whole, each backlog is 51 MB (about 400 MB for 8); sliced, each holds under 200 KB.
        assert grown < 40 << 20, f"RSS grew {grown >> 20} MB for {STALLED} stalled streams"
    for writer in stalled:
        writer.close()


@pytest.mark.parametrize("transport", ["stream", "sse", "ws"])
async def test_reading_subscriber_gets_backlog_and_what_came_meanwhile_once(
    server_factory, transport
):
    server = backlog_server(server_factory)
    async with aiohttp.ClientSession() as s:
        await fill_history(s, server.url)
        sub = Subscriber(s, server.url, transport, CHANNELS, history=HISTORY)
        await sub.connect()  # not read yet: the backlog waits in slices
        await wait_for_stats(
            s, server.url, lambda st: st["connections"][transport] == 1, f"{transport} held"
        )
        meanwhile = [{"channel": "c5", "data": i} for i in range(50)]
        await publish_batch(s, server.url, meanwhile)
        events = await take(sub, 64 * HISTORY + 50, timeout=60)
        await publish_batch(s, server.url, [{"channel": "c9", "data": "live"}])
        (live,) = await take(sub, 1)
        await sub.close()
    ids: dict[str, list[int]] = {}
    for event in events:
        ids.setdefault(event["channel"], []).append(event["id"])
    expected = {f"c{i}": list(range(1, HISTORY + 1)) for i in range(64)}
    expected["c5"] += list(range(HISTORY + 1, HISTORY + 51))
    assert ids == expected
    assert [e["data"] for e in events[-50:]] == list(range(50))
    assert (live["channel"], live["id"], live["data"]) == ("c9", HISTORY + 1, "live")
