"""Re-polls on one keep-alive connection: the same head but for its cursor is served without
being parsed again (`web.front.repoll`), and answers exactly as a first poll would: in order,
each message once, a bad cursor refused, an expired token refused, pipelined re-polls answered
one after the other."""

from __future__ import annotations

import asyncio
import time

import orjson

from pushserver.core.tokens import mint

from ...inprocess import get, in_process, poll, publish, read_response

SECRET = "repeat-secret-" + "0123456789abcdef" * 3


async def test_repolls_get_every_message_once_in_order():
    async with in_process() as (_, _, port):
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        cursors = []
        for reader, writer in conns:
            status, answer = await poll(reader, writer, "/lp/rep?timeout=0")
            assert status == 200 and answer["messages"] == []
            cursors.append(answer["cursor"])
        for n in range(6):
            held = [
                asyncio.create_task(poll(r, w, f"/lp/rep?timeout=20&cursor={c}"))
                for (r, w), c in zip(conns, cursors, strict=True)
            ]
            await asyncio.wait(held, timeout=0.05)  # held, or answered by the publish below
            await publish(port, "rep", n)
            for i, task in enumerate(held):
                status, answer = await task
                assert status == 200
                assert [m["data"] for m in answer["messages"]] == [n]
                cursors[i] = answer["cursor"]
        reader, writer = conns[0]
        status, answer = await poll(reader, writer, "/lp/rep?timeout=20&cursor=rep:e1:nine")
        assert (status, answer["error"]) == (400, "bad_cursor")
        status, answer = await poll(reader, writer, f"/lp/rep?timeout=0&cursor={cursors[0]}")
        assert (status, answer["messages"]) == (200, [])
        for _, writer in conns:
            writer.close()


async def test_pipelined_repolls_are_answered_in_order_without_nesting():
    """500 re-polls in one write, each answered at once: served one after the other."""
    async with in_process() as (_, _, port):
        await publish(port, "pipe", "x")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        count = 500
        writer.write(b"".join(get("/lp/pipe?timeout=0&history=1&cursor=") for _ in range(count)))
        for _ in range(count):
            _, body = await read_response(reader)
            assert [m["data"] for m in orjson.loads(body)["messages"]] == ["x"]
        writer.close()


async def test_a_repoll_whose_token_expired_is_refused():
    async with in_process(subscribe_secret=SECRET) as (_, _, port):
        token = mint(["tok"], 2, SECRET)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        status, answer = await poll(reader, writer, f"/lp/tok?timeout=0&token={token}&cursor=")
        assert status == 200
        target = f"/lp/tok?timeout=0&token={token}&cursor={answer['cursor']}"
        assert (await poll(reader, writer, target))[0] == 200
        deadline = time.time() + 10
        while True:
            status, answer = await poll(reader, writer, target)
            if status != 200 or time.time() > deadline:
                break
            await asyncio.sleep(0.05)
        assert (status, answer["message"]) == (401, "subscribe token expired")
        writer.close()
