"""`/metrics`' fan-out histogram after known fan-outs: one count per channel's flush, in the
bucket of its age, with nothing counted for a channel nobody is held on."""

from __future__ import annotations

import re
import time

import aiohttp

from pushserver.core.ages import FANOUT_AGE_BOUNDS
from pushserver.launcher import ServerProcess

from ...wire import Subscriber, publish, publish_batch, take, wait_for_subscribers

NAME = "pushserver_publish_to_write_seconds"


def histogram(text: str) -> tuple[dict[str, float], float, float]:
    """The buckets (by `le`), count and sum of the fan-out histogram in an exposition."""
    buckets = {
        le: float(value)
        for le, value in re.findall(
            rf'^{NAME}_bucket{{le="([^"]+)",worker="0"}} (\S+)$', text, re.M
        )
    }
    [count] = re.findall(rf'^{NAME}_count{{worker="0"}} (\S+)$', text, re.M)
    [total] = re.findall(rf'^{NAME}_sum{{worker="0"}} (\S+)$', text, re.M)
    return buckets, float(count), float(total)


async def test_each_flushed_channel_is_one_age_in_its_bucket(server_factory):
    srv: ServerProcess = server_factory("--max-flush-delay", "0")
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{srv.url}/metrics") as r:
            before = histogram(await r.text())
        assert before == ({**{str(b): 0.0 for b in FANOUT_AGE_BOUNDS}, "+Inf": 0.0}, 0.0, 0.0)
        sub = Subscriber(s, srv.url, "sse", "aged")
        await sub.connect()
        await wait_for_subscribers(s, srv.url, "aged", 1)
        started = time.time()
        for n in range(4):
            await publish(s, srv.url, "aged", n)
            await take(sub, 1)
        await publish_batch(s, srv.url, [{"channel": "aged", "data": n} for n in (4, 5)])
        await take(sub, 2)
        await publish(s, srv.url, "unheard", "nobody holds it")
        longest = time.time() - started
        async with s.get(f"{srv.url}/metrics") as r:
            buckets, count, total = histogram(await r.text())
        await sub.close()
    assert list(buckets) == [*(str(b) for b in FANOUT_AGE_BOUNDS), "+Inf"]
    assert count == buckets["+Inf"] == 5  # four flushes of one message, one of two
    assert 0 < total <= 5 * longest
    values = list(buckets.values())
    assert values == sorted(values)
    assert all(buckets[str(b)] == 5 for b in FANOUT_AGE_BOUNDS if b >= longest)
