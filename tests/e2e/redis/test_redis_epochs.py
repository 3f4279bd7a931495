"""Epochs within one Redis generation: a channel whose keys expired starts a new epoch, and a
cursor taken before its earlier epoch must get an `epoch` gap, while one taken before the new
epoch resumes without a gap. What Redis keeps for it stays bounded.

Real pushserver processes and a real redis-server on loopback (see redis_fixture.py). Expiry is
stood in for by deleting the channel's keys, which is all Redis does when they expire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import redis

from pushserver.broker.redis import scripts
from pushserver.core.positions import cursor_part
from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...wire import publish
from ..transports.test_core_transports import head_cursor
from .test_redis_broker import kept_on_b, node_args, wait_until

META_MS = 86_400_000


def expire(admin: redis.Redis, name: str) -> None:
    """What Redis does when an idle channel's keys expire."""
    assert admin.delete(scripts.meta_key(name), scripts.history_key(name)) == 2


async def poll(s: aiohttp.ClientSession, base: str, name: str, cursor: str) -> list[Any]:
    """The events a long-poll from `cursor` answers at once: ids, and gaps as tuples."""
    async with s.get(f"{base}/lp/{name}", params={"cursor": cursor, "timeout": "0"}) as r:
        assert r.status == 200, await r.text()
        events = (await r.json())["messages"]
    return [(e["reason"], e["from"], e["to"]) if "type" in e else e["id"] for e in events]


def id_data(events: list[dict[str, Any]]) -> list[Any]:
    """Messages as (id, data) and gaps as (reason, from, to): what an answer holds, at a look."""
    return [
        (e["reason"], e["from"], e["to"]) if "type" in e else (e["id"], e["data"]) for e in events
    ]


async def test_a_cursor_from_before_an_epoch_whose_keys_expired_gets_an_epoch_gap(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """The first epoch's 3 messages are gone with its keys; the second has 2. A cursor from
    before the first must not pass for one taken before the second, on either node: node a
    held the first epoch, node b never saw it."""
    a = server_factory(*node_args(redis_server))
    b = server_factory(*node_args(redis_server))
    admin = redis_server.client()
    async with aiohttp.ClientSession() as s:

        async def epoch(base: str) -> str:
            async with s.get(f"{base}/channels/news") as r:
                return (await r.json())["epoch"] if r.status == 200 else ""

        before = await head_cursor(s, a.url, "news")
        for n in range(3):
            await publish(s, a.url, "news", n)
        expire(admin, "news")
        between = await head_cursor(s, b.url, "news")
        for n in range(3, 5):
            await publish(s, b.url, "news", n)
        second = await epoch(b.url)

        async def a_in_second() -> bool:  # GET /channels reads a channel the node follows
            return await epoch(a.url) == second

        await wait_until(a_in_second, "node a in the second epoch")
        for node in (a, b):
            assert await poll(s, node.url, "news", before) == [("epoch", 1, 0), 1, 2]
            assert await poll(s, node.url, "news", between) == [1, 2]


async def test_a_kept_poll_asked_from_a_cursor_in_a_newer_epoch_than_this_node_holds_reads_redis(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """The channel's keys expire and its next message starts a new epoch while B's Redis
    connections are held: only A has seen the new epoch. A cursor A gave in it, sent on the
    poll B kept in the old one, gets the new epoch's messages after that cursor once B has
    read Redis: never an epoch gap followed by B's messages of the old epoch."""
    admin = redis_server.client()
    async with (
        aiohttp.ClientSession() as s,
        kept_on_b(redis_server, server_factory, s, "kept") as kept,
    ):
        a = kept.a
        async with kept.held(s):
            expire(admin, "kept")
            await publish(s, a.url, "kept", 3)

            async def from_a() -> dict[str, Any] | None:  # A's answer once A read the epoch
                params = {"cursor": kept.cursor, "timeout": "0"}
                async with s.get(f"{a.url}/lp/kept", params=params) as r:
                    assert r.status == 200, await r.text()
                    body: dict[str, Any] = await r.json()
                return body if body["messages"] else None

            body = await wait_until(from_a, "node a in the new epoch")
            assert id_data(body["messages"]) == [("epoch", 1, 0), (1, 3)]
            async with s.get(f"{a.url}/channels/kept") as r:
                epoch = (await r.json())["epoch"]
            assert body["cursor"] == cursor_part("kept", epoch, 1)
            await publish(s, a.url, "kept", 4)
            kept.ask(body["cursor"])
        body = await kept.answer()
        assert id_data(body["messages"]) == [(2, 4)]  # not [("epoch", 1, 0), (1, 1), (2, 2)]
        assert body["cursor"] == cursor_part("kept", epoch, 2)


def start_epoch(admin: redis.Redis, name: str, kept: int) -> str:
    """One message published to `name` by scripts.PUBLISH_LUA, `kept` names counted; its epoch."""
    keys = (
        scripts.meta_key(name),
        scripts.history_key(name),
        scripts.idempotency_key(name, ""),
        scripts.STARTS_KEY,
        scripts.FORGOTTEN_KEY,
    )
    args = ("c0ffee0001", 10, 60_000, META_MS, "1.5", "t:", kept, "", name, "x", "")
    [(epoch, *_)] = admin.eval(scripts.PUBLISH_LUA, len(keys), *keys, *args)
    return epoch.decode()


def unstarted_tag(admin: redis.Redis, name: str) -> str:
    """The tag scripts.SYNC_LUA reads for `name`, which has no keys."""
    keys = (
        scripts.meta_key(name),
        scripts.history_key(name),
        scripts.STARTS_KEY,
        scripts.FORGOTTEN_KEY,
    )
    args = (META_MS, -1, 10, "", name, "c0ffee0002", 10, "")
    found, _, _, tag = admin.eval(scripts.SYNC_LUA, len(keys), *keys, *args)
    assert found is None
    return tag.decode()


def test_an_unstarted_tag_never_comes_back_after_an_epoch_ended_and_the_count_is_bounded(
    redis_server: RedisServer,
) -> None:
    """Two names counted: as channels start and expire, the ones that began the fewest epochs
    are forgotten, and their slots' counts change their tags instead of taking them back."""
    admin = redis_server.client()
    assert unstarted_tag(admin, "news") == ""  # the common case: `u<generation>` as ever
    assert start_epoch(admin, "news", 2) == "c0ffee0001"
    expire(admin, "news")
    assert unstarted_tag(admin, "news") == "n1"
    assert start_epoch(admin, "news", 2) == "c0ffee0001n1"  # began after `u<generation>n1`
    expire(admin, "news")
    seen: dict[str, set[str]] = {"news": {"", "n1"}}
    for _ in range(4):
        for name in ("news", "a", "b", "c"):
            tag = unstarted_tag(admin, name)
            assert tag not in seen.setdefault(name, set()), (name, tag)
            seen[name].add(tag)
            assert start_epoch(admin, name, 2) == "c0ffee0001" + tag
            expire(admin, name)
            assert admin.zcard(scripts.STARTS_KEY) <= 2
    assert any(tag.startswith("g") for tags in seen.values() for tag in tags)  # some forgotten
    assert admin.strlen(scripts.FORGOTTEN_KEY) <= 65_536 * 4
