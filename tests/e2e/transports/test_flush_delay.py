"""After a costly fan-out the next flush waits (up to `--max-flush-delay`) so that messages a
publisher sends one per request meanwhile share one write per subscriber; the publisher's 201
does not wait for it. A message that comes after the last flush by more than the delay is
written at once."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from ...inprocess import in_process, open_stream, read_chunk


@pytest.mark.parametrize("max_delay", [0.1, 0.0])
async def test_publishes_inside_the_delay_share_one_write(max_delay: float) -> None:
    async with in_process(max_flush_delay=max_delay) as (state, _, port):
        reader, writer, _ = await open_stream(port, "/stream/fd")
        assert await read_chunk(reader) == b"\n"  # the (empty) padding
        # As if the last flush had been costly and had just ended: the next one waits.
        state.hub.fanout.flush_delay = max_delay
        state.hub.fanout.last_flush_end = asyncio.get_running_loop().time()
        async with aiohttp.ClientSession() as session:
            for n in range(3):
                async with session.post(f"http://127.0.0.1:{port}/pub/fd", data=str(n)) as resp:
                    assert resp.status == 201
        chunks = [await read_chunk(reader)]
        while sum(c.count(b"\n") for c in chunks) < 3:
            chunks.append(await read_chunk(reader))
        lines = b"".join(chunks).splitlines()
        assert [line.count(b'"data":"%d"' % n) for n, line in enumerate(lines)] == [1, 1, 1]
        assert len(chunks) == (1 if max_delay else 3)
        writer.close()


async def test_a_message_after_a_quiet_spell_is_not_delayed() -> None:
    async with in_process(max_flush_delay=0.1) as (state, _, port):
        reader, writer, _ = await open_stream(port, "/stream/fq")
        assert await read_chunk(reader) == b"\n"
        # A costly flush long ago: its delay (longer than the read deadline) no longer applies.
        state.hub.fanout.flush_delay = 3600.0
        state.hub.fanout.last_flush_end = asyncio.get_running_loop().time() - 3601.0
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/pub/fq", data="now") as resp,
        ):
            assert resp.status == 201
        assert b'"data":"now"' in await read_chunk(reader)
        writer.close()
