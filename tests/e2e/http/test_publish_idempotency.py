"""Publish idempotency: a repeated Idempotency-Key answers the original 201 and publishes
nothing, with either broker; a publish whose outcome Redis left unknown is answered as such."""

from __future__ import annotations

import asyncio
import gzip
import json
import signal
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...wire import Subscriber, publish, take, wait_for_subscribers
from ..redis.test_redis_broker import wait_until


@pytest.fixture(params=["memory", "redis"])
def node(request: pytest.FixtureRequest, server_factory: Callable[..., ServerProcess]) -> Any:
    if request.param == "memory":
        return server_factory()
    redis: RedisServer = request.getfixturevalue("redis_server")
    return server_factory("--redis", redis.url)


async def _post(
    s: aiohttp.ClientSession, url: str, body: Any, key: str | None = None
) -> tuple[int, Any]:
    headers = {} if key is None else {"Idempotency-Key": key}
    async with s.post(url, json=body, headers=headers) as r:
        return r.status, await r.json()


async def test_a_repeated_key_answers_the_original_and_publishes_nothing(node: Any) -> None:
    async with aiohttp.ClientSession() as s:
        sub = Subscriber(s, node.url, "stream", "idem,other")
        await sub.connect()
        await wait_for_subscribers(s, node.url, "idem", 1)
        reader = asyncio.create_task(take(sub, 5))
        first = await _post(s, f"{node.url}/pub/idem", "one", "k-1")
        again = await _post(s, f"{node.url}/pub/idem", "one, retried", "k-1")
        assert first[0] == again[0] == 201
        assert again[1] == first[1]
        assert first[1]["id"] == 1
        # The same key on another channel is another message.
        assert (await _post(s, f"{node.url}/pub/other", "o", "k-1"))[1]["id"] == 1
        batch = [
            {"channel": "idem", "data": "two", "idempotency_key": "k-2"},
            {"channel": "idem", "data": "three"},
            {"channel": "idem", "data": "two, again", "idempotency_key": "k-2"},
        ]
        status, results = await _post(s, f"{node.url}/pub", batch)
        assert status == 201
        assert [r["id"] for r in results] == [2, 3, 2]
        status, results = await _post(s, f"{node.url}/pub", batch[:1] + batch[2:])
        assert [r["id"] for r in results] == [2, 2]
        await publish(s, node.url, "idem", "last")
        events = await reader
        assert [(e["channel"], e["data"]) for e in events] == [
            ("idem", "one"),
            ("other", "o"),
            ("idem", "two"),
            ("idem", "three"),
            ("idem", "last"),
        ]
        assert events[-1]["id"] == 4
        await sub.close()


@pytest.mark.parametrize(
    "key", ["x" * 129, "has space", "tab\there", "caf\u00e9", "", 17], ids=repr
)
async def test_a_malformed_key_is_refused(shared_server: ServerProcess, key: object) -> None:
    async with aiohttp.ClientSession() as s:
        batch = [{"channel": "bad", "data": 1, "idempotency_key": key}]
        status, body = await _post(s, f"{shared_server.url}/pub", batch)
        assert (status, body["error"]) == (400, "bad_idempotency_key")
        if isinstance(key, str) and key.isascii():
            status, body = await _post(s, f"{shared_server.url}/pub/bad", 1, key)
            assert (status, body["error"]) == (400, "bad_idempotency_key")
        async with s.get(f"{shared_server.url}/channels/bad") as r:
            assert r.status == 404  # nothing was published


async def test_unknown_outcome_while_redis_hangs_then_the_retry_publishes_nothing(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """Redis is frozen after the publish script is sent: the server cannot know whether it
    ran. It says so (504 outcome_unknown), and the retry with the same key, once Redis is
    back, answers the original id without a second delivery."""
    node = server_factory("--redis", redis_server.url)
    async with aiohttp.ClientSession() as s:
        sub = Subscriber(s, node.url, "stream", "hang")
        await sub.connect()
        await wait_for_subscribers(s, node.url, "hang", 1)
        reader = asyncio.create_task(take(sub, 3, timeout=60))
        await publish(s, node.url, "hang", "warm")  # the script goes out on an open connection
        redis_server.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        try:
            async with s.post(
                f"{node.url}/pub/hang", json="once", headers={"Idempotency-Key": "hang-1"}
            ) as r:
                status, body, retry_after = r.status, await r.json(), r.headers.get("Retry-After")
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]

        async def retried() -> tuple[int, Any] | None:
            answer = await _post(s, f"{node.url}/pub/hang", "once", "hang-1")
            return answer if answer[0] == 201 else None

        again = await wait_until(retried, "the retry accepted once Redis is back")
        await publish(s, node.url, "hang", "after")
        events = await reader
        assert [e["data"] for e in events] == ["warm", "once", "after"]
        assert (status, body["error"], retry_after is not None) == (504, "outcome_unknown", True)
        assert again[1]["id"] == 2
        await sub.close()


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
async def test_a_batch_with_a_key_header_is_refused(
    shared_server: ServerProcess, encoding: str
) -> None:
    """A batch's keys go in its items: with the header alone, a retried batch would publish
    twice. Both the front end and aiohttp (which takes compressed bodies) refuse it."""
    body = json.dumps([{"channel": "batch-header", "data": 1}]).encode()
    headers = {"Content-Type": "application/json", "Idempotency-Key": "k-batch"}
    if encoding == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{shared_server.url}/pub", data=body, headers=headers) as r:
            assert (r.status, (await r.json())["error"]) == (400, "bad_idempotency_key")
        async with s.get(f"{shared_server.url}/channels/batch-header") as r:
            assert r.status == 404  # nothing was published
