"""The cluster engine end to end: real pushserver processes on a real Redis Cluster (three
primaries, a replica each, see redis_cluster.py), channels spread over every primary.

What is checked: a channel's keys and shard channel share its slot and messages go by sharded
pub/sub; a killed primary stops only its own channels (503 `broker_down`) while the others go
on; after its replica takes over, every acknowledged publish reaches subscribers once, in order,
and a keyed retry of a publish whose outcome was unknown never makes a second message.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import pytest
from redis.crc import key_slot

from pushserver.broker.redis.scripts import GENERATION_KEY
from pushserver.launcher import ServerProcess

from ...redis_cluster import (  # noqa: F401
    ClusterNode,
    RedisClusterSet,
    channel_in_slot,
    redis_cluster_fixture,
)
from ...wire import Subscriber, publish, publish_batch, streaming, take, wait_for_subscribers
from ..transports.test_core_transports import head_cursor
from .test_redis_broker import wait_until

T = TypeVar("T")

SLOTS = (100, 6000, 12000)
"""One slot on each primary of a fresh cluster (redis-cli gives each a third of 16,384)."""


def cluster_node(
    factory: Callable[..., ServerProcess], cluster: RedisClusterSet, *extra: str
) -> ServerProcess:
    return factory("--redis", cluster.url, "--heartbeat", "0.5", *extra)


async def healthy(session: aiohttp.ClientSession, node: ServerProcess) -> bool:
    async with session.get(f"{node.url}/healthz") as r:
        return r.status == 200


REFUSED_FOR = 60.0
"""Seconds a keyed publish may go on being refused (503, 504) after the later of its first try
and the end of the topology change running meanwhile: while the change runs, refusals are
Redis's own answer (no primary, or no replica for `WAIT`), however long the change takes."""


def log_tail(node: ServerProcess, chars: int = 3000) -> str:
    return f"node {node.url} log tail:\n{node.log[-chars:]}"


async def keyed(
    session: aiohttp.ClientSession,
    node: ServerProcess,
    ch: str,
    n: int,
    changing: asyncio.Future[Any] | None = None,
    strict: bool = False,
) -> int:
    """Publish `n` with its key until it is acknowledged; its id. It may be refused while
    `changing` runs, and for `REFUSED_FOR` seconds after its first try or the change's end;
    `strict`: never."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REFUSED_FOR
    while True:
        headers = {"Idempotency-Key": f"k{n}"}
        async with session.post(f"{node.url}/pub/{ch}", json=n, headers=headers) as r:
            body: dict[str, Any] = await r.json()
            if r.status == 201:
                return int(body["id"])
            assert r.status in (503, 504) and not strict, (r.status, body, log_tail(node))
        if changing is not None and not changing.done():
            deadline = loop.time() + REFUSED_FOR
        since = "the change ended" if changing is not None else "its first try"
        assert loop.time() < deadline, (
            f"publish {n} refused for {REFUSED_FOR} s after {since}: last answer {r.status} "
            f"{body}; {log_tail(node)}"
        )
        await asyncio.sleep(0.2)


async def delivered(sub: Subscriber, n: int, node: ServerProcess) -> list[dict[str, Any]]:
    """The subscriber's next `n` events (`take`); failing, with the log of its node."""
    try:
        return await take(sub, n, timeout=REFUSED_FOR)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {log_tail(node)}") from None


async def publish_across(
    session: aiohttp.ClientSession,
    node: ServerProcess,
    channel: str,
    change: Callable[[], object],
    strict: bool = False,
) -> dict[int, int]:
    """Keyed publishes of 0, 1, 2... to `channel` through `node`: five, then one after another
    while `change` runs (in a thread), then five more; each number's id, in the order
    acknowledged. `strict`: none may be refused, not even while the change runs."""
    counter = itertools.count()
    acked = {n: await keyed(session, node, channel, n) for n in itertools.islice(counter, 5)}
    changing = asyncio.create_task(asyncio.to_thread(change))
    while not changing.done():
        n = next(counter)
        acked[n] = await keyed(session, node, channel, n, changing, strict)
    await changing
    acked |= {n: await keyed(session, node, channel, n) for n in itertools.islice(counter, 5)}
    return acked


async def run_through(
    url: str,
    factory: Callable[..., ServerProcess],
    channel: str,
    change: Callable[[], object],
    *extra: str,
    strict: bool = False,
) -> None:
    """Keyed publishes to `channel` through node a, before, while and after `change` runs (in a
    thread; `strict`: none refused), to subscribers on node b on every streaming transport: each
    gets every acknowledged message once and in order, no id is handed out twice, and both
    nodes end healthy. The
    history holds every message the run publishes, so one a node missed while the change ran is
    read back, never trimmed away (a trimmed one would be an honest `expired` gap instead)."""
    a = factory("--redis", url, "--heartbeat", "0.5", "--history-size", "100000", *extra)
    b = factory("--redis", url, "--heartbeat", "0.5", "--history-size", "100000", *extra)
    async with aiohttp.ClientSession() as s:
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node on Redis")
        subs = await streaming(s, b.url, channel)
        acked = await publish_across(s, a, channel, change, strict)
        ordered = sorted(acked, key=acked.__getitem__)
        assert [acked[n] for n in ordered] == list(range(1, len(acked) + 1))
        for sub in subs:
            got = await delivered(sub, len(acked), b)
            assert [e["data"] for e in got] == ordered, sub.transport
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node healthy again")


async def test_channels_live_in_their_slot_and_travel_by_sharded_pubsub(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    a = cluster_node(server_factory, redis_cluster)
    b = cluster_node(server_factory, redis_cluster)
    names = [channel_in_slot(slot) for slot in SLOTS]
    async with aiohttp.ClientSession() as s:
        await wait_until(lambda: healthy(s, b), "node b on the cluster")
        subs = [Subscriber(s, b.url, "stream", name) for name in names]
        for sub in subs:
            await sub.connect()
        for name in names:
            await wait_for_subscribers(s, b.url, name, 1)
        for slot, name in zip(SLOTS, names, strict=True):
            owner = redis_cluster.owner(slot)
            assert owner.call("PUBSUB", "SHARDNUMSUB", f"pushserver:0:{{{name}}}")[1] == 1
            await publish(s, a.url, name, f"to {name}")
            assert owner.call("HGET", f"pushserver:{{{name}}}:m", "i") == b"1"
            assert owner.call("PUBSUB", "NUMSUB", f"pushserver:0:{name}")[1] == 0
        for sub, name in zip(subs, names, strict=True):
            [event] = await take(sub, 1)
            assert event["data"] == f"to {name}"


async def test_a_killed_primary_stops_only_its_channels_and_loses_nothing_acknowledged(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    a = cluster_node(server_factory, redis_cluster)
    b = cluster_node(server_factory, redis_cluster)
    hit, other = channel_in_slot(SLOTS[0]), channel_in_slot(SLOTS[1])
    counter = itertools.count()
    async with aiohttp.ClientSession() as s:
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node on the cluster")
        subs = await streaming(s, b.url, hit)
        acked = {n: await keyed(s, a, hit, n) for n in itertools.islice(counter, 5)}

        killed, _ = await asyncio.to_thread(redis_cluster.kill_primary, SLOTS[0])
        # its channels were refused meanwhile (or waited); another primary's never were
        assert (await publish(s, a.url, other, "still here"))["id"] == 1
        revived = asyncio.create_task(asyncio.to_thread(redis_cluster.revive, killed))
        acked |= {n: await keyed(s, a, hit, n, revived) for n in itertools.islice(counter, 10)}
        await revived
        acked |= {n: await keyed(s, a, hit, n) for n in itertools.islice(counter, 5)}

        ordered = sorted(acked, key=acked.__getitem__)
        assert [acked[n] for n in ordered] == list(range(1, 21))  # no id handed out twice
        for sub in subs:
            got = await delivered(sub, 20, b)
            assert [e["data"] for e in got] == ordered, sub.transport


async def test_a_manual_failover_is_followed(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """The old primary pushes `sunsubscribe` and then takes SPUBLISH as a replica, to nobody."""
    channel = channel_in_slot(SLOTS[1])
    await run_through(
        redis_cluster.url, server_factory, channel, lambda: redis_cluster.failover(SLOTS[1])
    )


async def test_a_busy_channels_slot_migrated_under_load(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """Publishes meet ASK (and TRYAGAIN while a channel's keys are split) during the move and
    MOVED after it, and follow them: none is refused. The source pushes `sunsubscribe` at the
    hand-over, the target too when the slot is assigned to it again, and the channel is
    followed on the target."""
    channel = channel_in_slot(SLOTS[2])

    def migrate() -> None:
        target = redis_cluster.owner(SLOTS[0])
        redis_cluster.migrate(SLOTS[2], target).finish()

    await run_through(redis_cluster.url, server_factory, channel, migrate, strict=True)


def asked(node: ClusterNode) -> int:
    """ASKING commands the node has been sent."""
    with node.client() as client:
        return int(client.info("commandstats").get("cmdstat_asking", {}).get("calls", 0))


HELD = 4.0
"""Seconds the migration test holds a slot half-way: longer than the 3 s a publish followed a
migration before it had `--redis-migration-wait` (10 s unless told)."""


async def half_way(
    cluster: RedisClusterSet,
    slot: int,
    ask: Callable[[], Awaitable[T]],
    held: float = 0.0,
    askings: int = 1,
) -> T:
    """`ask()`'s answer, asked while `slot` is half-way to another primary (its keys moved,
    the slot not yet given up): once the target has been sent `ASKING` `askings` times (or
    `ask` answered), and `held` seconds have passed since it was asked, the migration is
    finished."""
    target = cluster.owner(SLOTS[0])
    migration = await asyncio.to_thread(cluster.migrate, slot, target)
    assert await asyncio.to_thread(migration.move_keys) > 0
    before = asked(target)
    loop = asyncio.get_running_loop()
    until = loop.time() + held
    asking = asyncio.ensure_future(ask())
    await wait_until(  # or answered: then its answer says what went wrong
        lambda: asyncio.to_thread(lambda: asking.done() or asked(target) >= before + askings),
        "ASKING",
    )
    await asyncio.sleep(max(0.0, until - loop.time()))  # the migration's own length
    assert held == 0.0 or not asking.done(), asking.result()
    await asyncio.to_thread(migration.finish)
    return await asking


@pytest.mark.parametrize("replicas", ["1", "0"])
async def test_a_publish_while_a_slot_migrates_waits_for_it_and_is_never_refused(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess], replicas: str
) -> None:
    """A migration held half-way for `HELD` seconds: the channel's keys have left the source,
    which answers its script ASK; the target, asked after ASKING, answers TRYAGAIN (a key the
    script names does not exist there), and the node tries again for as long as the cluster
    answers so, up to `--redis-migration-wait`: until the slot has changed hands (MOVED), then
    publishes on the new owner (with `--redis-replicas 0`, its script notifies from there). A
    node told to wait less refuses its publish meanwhile (503, not published). Then more
    publishes, to subscribers on another node: each gets every message once, in order."""
    a, b = (cluster_node(server_factory, redis_cluster, "--redis-replicas", replicas) for _ in "ab")
    hasty = cluster_node(
        server_factory, redis_cluster, "--redis-replicas", replicas, "--redis-migration-wait", "0.5"
    )
    channel = channel_in_slot(SLOTS[2])

    async def refused_then_published() -> dict[str, Any]:
        waiting = asyncio.create_task(publish(s, a.url, channel, 3))
        async with s.post(f"{hasty.url}/pub/{channel}", json="refused") as r:
            assert (r.status, (await r.json())["error"]) == (503, "broker_down")
        return await waiting

    async with aiohttp.ClientSession() as s:
        for node in (a, b, hasty):
            await wait_until(lambda node=node: healthy(s, node), "node on the cluster")
        subs = await streaming(s, b.url, channel)
        sent = [await publish(s, a.url, channel, n) for n in range(3)]
        sent.append(await half_way(redis_cluster, SLOTS[2], refused_then_published, HELD))
        sent += [await publish(s, a.url, channel, n) for n in range(4, 8)]
        assert [m["id"] for m in sent] == list(range(1, 9))
        for sub in subs:
            got = await delivered(sub, 8, b)
            assert [e["data"] for e in got] == list(range(8)), sub.transport


async def test_a_first_read_while_a_slot_migrates_is_answered_never_refused(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """A migration stopped half-way, and a node that follows nothing yet: its first read of
    the channel (a long-poll from a cursor) is answered ASK by the source, goes to the target
    after ASKING, and, if the target lacks a key it names, again until the slot has moved. It
    gets every message from its cursor, never a 503. So does an operator's look at the
    channel (`GET /channels/...`), on a node that does not follow it: the same read."""
    a = cluster_node(server_factory, redis_cluster)
    channel = channel_in_slot(SLOTS[2])
    async with aiohttp.ClientSession() as s:
        await wait_until(lambda: healthy(s, a), "node a on the cluster")
        cursor = await head_cursor(s, a.url, channel)
        for n in range(3):
            await publish(s, a.url, channel, n)
        c, d = (
            cluster_node(server_factory, redis_cluster),
            cluster_node(server_factory, redis_cluster),
        )
        for node in (c, d):
            await wait_until(lambda node=node: healthy(s, node), "node on the cluster")

        async def answered(node: ServerProcess, path: str, **params: str) -> Any:
            async with s.get(f"{node.url}{path}", params=params) as r:
                body = await r.json()
                assert r.status == 200, (body, log_tail(node))
                return body

        async def both() -> tuple[Any, Any]:
            return await asyncio.gather(
                answered(c, f"/lp/{channel}", cursor=cursor, timeout="0"),
                answered(d, f"/channels/{channel}"),
            )

        polled, looked = await half_way(redis_cluster, SLOTS[2], both, askings=2)
        assert [e["data"] for e in polled["messages"]] == [0, 1, 2]
        assert (looked["last_id"], looked["buffered"], looked["subscribers"]) == (3, 3, 0)


async def test_a_notification_refused_after_its_publish_is_stored_is_an_unknown_outcome(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """The channel's primary stores a publish and its replica holds it, then refuses the
    notification (here through an ACL that denies SPUBLISH, a refusal the cluster can be put
    in at will; CLUSTERDOWN or a MOVED to a primary the node does not know end the same way):
    the publish was made, so it is answered 504 `outcome_unknown`, never 503 "not published",
    and its keyed retry finds it and notifies it again. Subscribers get every message once, in
    order, the stored one without waiting for the channel's next."""
    a, b = cluster_node(server_factory, redis_cluster), cluster_node(server_factory, redis_cluster)
    channel = channel_in_slot(SLOTS[1])
    owner = redis_cluster.owner(SLOTS[1])
    async with aiohttp.ClientSession() as s:
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node on the cluster")
        subs = await streaming(s, b.url, channel)
        assert await keyed(s, a, channel, 0, strict=True) == 1
        owner.call("ACL", "SETUSER", "default", "-spublish")
        try:
            headers = {"Idempotency-Key": "k1"}
            async with s.post(f"{a.url}/pub/{channel}", json=1, headers=headers) as r:
                body = await r.json()
                assert (r.status, body["error"]) == (504, "outcome_unknown"), log_tail(a)
        finally:
            owner.call("ACL", "SETUSER", "default", "+spublish")
        assert await keyed(s, a, channel, 1, strict=True) == 2  # the stored one
        for sub in subs:  # notified by the retry, not left until the channel's next message
            got = await delivered(sub, 2, b)
            assert [e["data"] for e in got] == [0, 1], sub.transport
        assert await keyed(s, a, channel, 1, strict=True) == 2  # a repeat reaches nobody twice
        assert await keyed(s, a, channel, 2, strict=True) == 3
        for sub in subs:
            got = await delivered(sub, 1, b)
            assert [e["data"] for e in got] == [2], sub.transport


async def test_publishes_to_many_slots_of_one_primary_go_one_script_call_per_slot(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """A script may reach one slot only (CROSSSLOT): a batch over several slots of one primary,
    and concurrent publishes to them, are split by slot, not just by primary."""
    node = cluster_node(server_factory, redis_cluster)
    names = [channel_in_slot(slot) for slot in (100, 101, 102, 6000)]
    assert redis_cluster.owner(100) is redis_cluster.owner(102)
    async with aiohttp.ClientSession() as s:
        await wait_until(lambda: healthy(s, node), "the node on the cluster")
        batch = [{"channel": name, "data": n} for n in range(3) for name in names]
        answers = await publish_batch(s, node.url, batch)
        assert [m["id"] for m in answers] == [1] * 4 + [2] * 4 + [3] * 4
        answers = await asyncio.gather(*(publish(s, node.url, n, "x") for n in names * 5))
        assert sorted(a["id"] for a in answers) == sorted(list(range(4, 9)) * 4)


async def test_a_primary_that_loses_its_data_gives_its_channels_a_new_epoch(
    redis_cluster: RedisClusterSet, server_factory: Callable[..., ServerProcess]
) -> None:
    """`FLUSHALL` on one primary (its replica follows), as a primary restarted empty would:
    the cluster's generation key lives on another shard and is kept, so the slot's own epoch
    counts must change, or a cursor taken before the channel's first epoch would pass for one
    taken before the epoch begun after the loss, and skip the lost messages in silence."""
    node = cluster_node(server_factory, redis_cluster)
    channel = channel_in_slot(SLOTS[1])
    owner = redis_cluster.owner(SLOTS[1])
    assert owner is not redis_cluster.owner(key_slot(GENERATION_KEY.encode()))
    async with aiohttp.ClientSession() as s:
        await wait_until(lambda: healthy(s, node), "the node on the cluster")
        before = await head_cursor(s, node.url, channel)
        for n in range(3):
            await publish(s, node.url, channel, f"a{n}")
        owner.call("FLUSHALL")
        assert (await publish(s, node.url, channel, "b0"))["id"] == 1
        fresh = cluster_node(server_factory, redis_cluster)  # it knows only what Redis holds
        await wait_until(lambda: healthy(s, fresh), "a second node on the cluster")
        params = {"cursor": before, "timeout": "0"}
        async with s.get(f"{fresh.url}/lp/{channel}", params=params) as r:
            events = (await r.json())["messages"]
        assert [e.get("reason") or e["data"] for e in events] == ["epoch", "b0"], events
