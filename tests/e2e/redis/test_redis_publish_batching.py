"""The Redis broker's publishing: concurrent publishes share script calls, and the messages of a
call reach other nodes in one notification per channel, decoded byte for byte.

A server runs in the test's process (tests/inprocess.py) against a real redis-server.
"""

from __future__ import annotations

import asyncio
import time

import redis
import redis.asyncio
import redis.utils

from pushserver.broker.redis.scripts import notification, topic_prefix
from pushserver.core.broker import Item
from pushserver.core.messages import Message

from ...inprocess import DEADLINE, in_process
from ...redis_fixture import RedisServer, redis_server_fixture, script_stats  # noqa: F401


def script_calls(client: redis.Redis) -> int:
    """Script runs Redis completed (a NOSCRIPT refusal does not count)."""
    return sum(calls - failed for calls, failed in script_stats(client).values())


async def test_concurrent_publishes_share_script_calls(redis_server: RedisServer) -> None:
    client = redis_server.client()
    n = 20
    async with in_process(redis=redis_server.url) as (state, _, _port):
        before = script_calls(client)
        results = await asyncio.gather(
            *(state.hub.publish([("news", b"%d" % i)]) for i in range(n))
        )
        calls = script_calls(client) - before
    assert [[m.data for m, _ in r] for r in results] == [[b"%d" % i] for i in range(n)]
    assert sorted(m.id for r in results for m, _ in r) == list(range(1, n + 1))
    assert 1 <= calls < n


async def test_a_call_notifies_each_channel_once_with_all_its_messages(
    redis_server: RedisServer,
) -> None:
    listener = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port)
    pubsub = listener.pubsub()
    prefix = topic_prefix(0)
    await pubsub.subscribe(prefix + "a", prefix + "b")
    await confirmed(pubsub, 2)
    items = [
        Item("a", b'"line\\nbreak"'),
        Item("b", b"text with\nnewline and spaces "),
        Item("a", b""),
        Item("b", b"once", "key-1"),
        Item("a", "é ü 3 4".encode()),
        Item("b", b"once", "key-1"),  # a repeat of a remembered key is not published again
        Item("a", b"\n\n"),
    ]
    try:
        async with in_process(redis=redis_server.url) as (state, _, _port):
            published = await state.hub.publish(items)
        notes = await notifications(pubsub, expected=6)
    finally:
        await pubsub.aclose()
        await listener.aclose()
    assert [topic for topic, _ in notes] == [prefix + "a", prefix + "b"]
    got = {topic[len(prefix) :]: messages for topic, messages in notes}
    originals = [m for m, _ in published]
    for name in ("a", "b"):
        want = {m.id: m for m in originals if m.channel == name}.values()  # repeats once
        assert [fields(m) for m in got[name]] == [fields(m) for m in want]
    assert [m.id for m in got["a"]] == [1, 2, 3, 4]
    assert [m.data for m in got["b"]] == [b"text with\nnewline and spaces ", b"once"]


async def confirmed(pubsub: redis.asyncio.client.PubSub, topics: int) -> None:
    """Wait until Redis confirmed `topics` SUBSCRIBEs, so nothing published later is missed."""
    deadline = time.monotonic() + DEADLINE
    while topics:
        assert time.monotonic() < deadline, "SUBSCRIBE not confirmed"
        reply = await pubsub.get_message(timeout=1.0)
        if reply is not None and reply["type"] == "subscribe":
            topics -= 1


async def notifications(
    pubsub: redis.asyncio.client.PubSub, expected: int
) -> list[tuple[str, list[Message]]]:
    """Read notifications until they carry `expected` messages in all."""
    out: list[tuple[str, list[Message]]] = []
    deadline = time.monotonic() + DEADLINE
    while sum(len(messages) for _, messages in out) < expected:
        assert time.monotonic() < deadline, f"notifications so far: {out}"
        note = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        if note is not None:
            topic = note["channel"].decode()
            name = topic.rsplit(":", 1)[1]
            out.append((topic, notification(name, note["data"])))
    return out


def fields(m: Message) -> tuple[str, str, int, float, bytes]:
    return (m.channel, m.epoch, m.id, m.ts, m.data)


def test_the_redis_client_parses_replies_with_hiredis() -> None:
    """The C parser is a declared dependency: the pure-Python one costs a worker far more CPU
    per notification and reply."""
    assert redis.utils.HIREDIS_AVAILABLE
