"""`?history=N` against a real server: the last N buffered messages, or all of them when fewer
are buffered (N up to the history size), on every transport and for several channels."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...wire import TRANSPORTS, Subscriber, publish, publish_batch, take, wait_for_subscribers


@pytest.fixture(scope="module")
def history_server() -> Iterator[ServerProcess]:
    with ServerProcess(["--history-size", "10", "--heartbeat", "1"]) as srv:
        yield srv


@pytest.mark.parametrize("history", [4, 5, 7, 10])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_history_beyond_what_is_buffered_gives_all_of_it(history_server, transport, history):
    """4 messages buffered: history=4..10 gives ids 1-4, then live messages follow."""
    url = history_server.url
    channel = f"h-{transport}-{history}"
    async with aiohttp.ClientSession() as s:
        await publish_batch(s, url, [{"channel": channel, "data": n} for n in range(1, 5)])
        sub = Subscriber(s, url, transport, channel, history=history)
        await sub.connect()
        if transport == "longpoll":
            events = await take(sub, 4, timeout=10)
        else:
            await wait_for_subscribers(s, url, channel, 1)
            await publish(s, url, channel, 5)
            events = await take(sub, 5, timeout=10)
        await sub.close()
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert [e["data"] for e in events] == list(range(1, len(events) + 1))


async def test_history_on_several_channels_gives_each_all_it_buffers(history_server):
    url = history_server.url
    async with aiohttp.ClientSession() as s:
        items = [{"channel": "ha", "data": n} for n in range(1, 5)]
        items += [{"channel": "hb", "data": n} for n in range(1, 3)]
        await publish_batch(s, url, items)
        async with s.get(f"{url}/lp/ha,hb", params={"history": "6", "timeout": "0"}) as r:
            assert r.status == 200, await r.text()
            body = await r.json()
    got = [(m["channel"], m["id"]) for m in body["messages"]]
    assert got == [("ha", 1), ("ha", 2), ("ha", 3), ("ha", 4), ("hb", 1), ("hb", 2)]
