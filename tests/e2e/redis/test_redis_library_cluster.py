"""What redis-py's asyncio cluster client does when the cluster's topology changes, against a
real 3-primary / 3-replica cluster (redis_cluster.py).

These pin what the cluster engine relies on, and what it must work around: sharded messages
arrive (redis-py#3966 is in the pinned version); MOVED and ASK are followed, and a command
refused in the middle of a migration never runs; a connection error is not retried when the
client is told so, and otherwise is (a script that ran runs again); a promoted replica lacks the
scripts; and `ClusterPubSub` is left deaf by every change that moves a slot away from the node
it subscribed on, until the same client happens to meet a MOVED.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import ClusterNode, ClusterPubSub, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import ClusterError, MovedError, NoScriptError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...inprocess import DEADLINE, until
from ...redis_cluster import ClusterNode as Node
from ...redis_cluster import RedisClusterSet, redis_cluster_fixture  # noqa: F401

CHANNEL = "{news}"
SLOT = key_slot(b"news")
COUNT_AND_LOG = (
    "redis.call('INCR', KEYS[1]); redis.call('XADD', KEYS[2], '*', 'd', ARGV[1]); "
    "return redis.call('GET', KEYS[1])"
)
SLOW_COUNT = (
    "redis.call('INCR', KEYS[1]); local function ms() local t = redis.call('TIME'); "
    "return t[1] * 1000 + t[2] / 1000 end; local stop = ms() + 800; "
    "while ms() < stop do end; return 1"
)
COUNTER, LOG = "{news}counter", "{news}log"


def test_the_pinned_redis_py_has_the_sharded_pubsub_fixes() -> None:
    assert tuple(int(n) for n in redis.__version__.split(".")[:2]) >= (8, 1), redis.__version__


def cluster_client(cluster: RedisClusterSet, retries: int = 0, **options: Any) -> RedisCluster:
    return RedisCluster(
        startup_nodes=[ClusterNode("127.0.0.1", node.port) for node in cluster.nodes],
        retry=Retry(NoBackoff(), retries),
        **options,
    )


@pytest.fixture
async def client(redis_cluster: RedisClusterSet) -> AsyncIterator[RedisCluster]:
    """A cluster client that never sends a command twice, as the engine's must not."""
    rc = cluster_client(redis_cluster)
    await rc.initialize()
    yield rc
    await rc.aclose()


async def events(pubsub: ClusterPubSub, last: tuple[str, Any]) -> list[tuple[str, Any]]:
    """What `get_sharded_message` gives (a message's type and data, or the name of an error it
    raised) up to the event `last`."""
    seen: list[tuple[str, Any]] = []
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            message = await pubsub.get_sharded_message(timeout=0.1)
        except (MovedError, RedisConnectionError, RuntimeError) as exc:
            seen.append(("raised", type(exc).__name__))
            await asyncio.sleep(0.05)
            continue
        if message is not None:
            seen.append((message["type"], message["data"]))
            if seen[-1] == last:
                return seen
    raise AssertionError(f"no {last} within {DEADLINE} s, only {seen}")


def subscribers_on(node: Node) -> int:
    return int(node.call("PUBSUB", "SHARDNUMSUB", CHANNEL)[1])


async def hears(client: RedisCluster, pubsub: ClusterPubSub) -> None:
    """A message published now reaches the subscriber, after whatever it still had to read."""
    assert await client.spublish(CHANNEL, "heard") == 1
    assert (await events(pubsub, ("smessage", b"heard")))[-1] == ("smessage", b"heard")


async def subscribed(client: RedisCluster) -> ClusterPubSub:
    pubsub = client.pubsub()
    await pubsub.ssubscribe(CHANNEL)
    assert await events(pubsub, ("ssubscribe", 1)) == [("ssubscribe", 1)]
    return pubsub


async def test_sharded_messages_reach_a_subscriber_and_its_handler(client: RedisCluster) -> None:
    pubsub = await subscribed(client)
    assert await client.spublish(CHANNEL, "one") == 1
    assert await events(pubsub, ("smessage", b"one")) == [("smessage", b"one")]
    handled: list[bytes] = []
    with_handler = client.pubsub()
    await with_handler.ssubscribe(**{CHANNEL: lambda m: handled.append(m["data"])})
    assert await client.spublish(CHANNEL, "two") == 2

    async def read() -> None:
        while not handled:
            await with_handler.get_sharded_message(timeout=0.1)

    await asyncio.wait_for(read(), DEADLINE)
    assert handled == [b"two"]
    await pubsub.aclose()
    await with_handler.aclose()


async def test_a_migrated_slot_leaves_the_subscriber_deaf_until_the_client_meets_moved(
    redis_cluster: RedisClusterSet, client: RedisCluster
) -> None:
    pubsub = await subscribed(client)
    source = redis_cluster.owner(SLOT)
    target = next(p for p in redis_cluster.primaries() if p is not source)
    redis_cluster.migrate(SLOT, target).finish()

    # The source tells its subscribers the slot left: redis-py hands that on as a message and
    # still counts the channel as subscribed, but nobody listens for it anywhere now.
    assert await events(pubsub, ("sunsubscribe", 0)) == [("sunsubscribe", 0)]
    assert pubsub.subscribed and CHANNEL.encode() in pubsub.shard_channels
    assert subscribers_on(source) == subscribers_on(target) == 0
    other = cluster_client(redis_cluster)
    assert await other.spublish(CHANNEL, "lost") == 0
    await other.aclose()

    # Only a MOVED met by this client refreshes its slot map, and the refresh moves the
    # subscription (in a task of its own, racing the publish that met the MOVED); reading
    # meanwhile raises the old node's MOVED reply to the SUNSUBSCRIBE the refresh sends it.
    await client.spublish(CHANNEL, "met MOVED")
    seen = await events(pubsub, ("ssubscribe", 1))
    assert ("raised", "MovedError") in seen, seen
    assert subscribers_on(target) == 1
    await hears(client, pubsub)
    await pubsub.aclose()


async def test_a_manual_failover_leaves_the_subscriber_deaf_and_publishes_reach_nobody(
    redis_cluster: RedisClusterSet, client: RedisCluster
) -> None:
    pubsub = await subscribed(client)
    old, new = redis_cluster.failover(SLOT)
    assert await events(pubsub, ("sunsubscribe", 0)) == [("sunsubscribe", 0)]
    assert pubsub.subscribed

    # SPUBLISH is served by a replica of the slot's shard (sharded pub/sub runs on replicas
    # too), so the old primary, now a replica, takes it without a MOVED: the client's slot map
    # stays stale, nothing moves the subscription, and every publish reaches nobody.
    calls_before = old.call("INFO", "commandstats").get("cmdstat_spublish", {}).get("calls", 0)
    for n in range(3):
        assert await client.spublish(CHANNEL, f"lost {n}") == 0
    calls_after = old.call("INFO", "commandstats")["cmdstat_spublish"]["calls"]
    assert calls_after - calls_before == 3
    assert subscribers_on(new) == subscribers_on(old) == 0
    assert await pubsub.get_sharded_message(timeout=0.2) is None
    await pubsub.aclose()


async def test_a_killed_primary_fails_every_read_until_the_client_meets_an_error(
    redis_cluster: RedisClusterSet, client: RedisCluster
) -> None:
    pubsub = await subscribed(client)
    _, new = await asyncio.to_thread(redis_cluster.kill_primary, SLOT)

    # The promoted replica serves the slot, but the subscriber still reads from the dead node:
    # each read raises (at once, however often it is called), and stays deaf.
    for _ in range(3):
        with pytest.raises(RedisConnectionError):
            await pubsub.get_sharded_message(timeout=0.1)
    assert subscribers_on(new) == 0

    # A command through the same client fails once on the dead node (not retried: retries 0),
    # which marks the slot map stale; the next one refreshes it, and that moves the
    # subscription (in a task of its own, racing the publish).
    with pytest.raises(RedisConnectionError):
        await client.spublish(CHANNEL, "to the dead node")
    await client.spublish(CHANNEL, "refreshed")
    await until(lambda: subscribers_on(new) == 1, "the subscription moved to the new primary")
    await hears(client, pubsub)
    await pubsub.aclose()


async def test_scripts_follow_moved_and_ask_and_never_run_while_refused(
    redis_cluster: RedisClusterSet, client: RedisCluster
) -> None:
    sha = await client.script_load(COUNT_AND_LOG)  # loaded on every primary
    assert await client.evalsha(sha, 2, COUNTER, LOG, "a") == b"1"
    source = redis_cluster.owner(SLOT)
    target = next(p for p in redis_cluster.primaries() if p is not source)
    migration = redis_cluster.migrate(SLOT, target)

    # One of the script's keys moved, the other not yet: Redis answers TRYAGAIN, redis-py asks
    # again a few times, then gives up without the script having run anywhere.
    source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", COUNTER)
    with pytest.raises(ClusterError, match="TTL exhausted"):
        await client.evalsha(sha, 2, COUNTER, LOG, "refused")
    # Both keys moved, the slot still the source's: ASK, followed.
    source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", LOG)
    assert await client.evalsha(sha, 2, COUNTER, LOG, "asked") == b"2"
    # The slot handed over: MOVED, followed.
    migration.finish()
    assert await client.evalsha(sha, 2, COUNTER, LOG, "moved") == b"3"
    assert [e[1][b"d"] for e in await client.xrange(LOG)] == [b"a", b"asked", b"moved"]

    # The primary killed: its replica takes over with the data but without the script.
    await asyncio.to_thread(redis_cluster.kill_primary, SLOT)
    with pytest.raises(RedisConnectionError):
        await client.evalsha(sha, 2, COUNTER, LOG, "to the dead node")
    with pytest.raises(NoScriptError):
        await client.evalsha(sha, 2, COUNTER, LOG, "unknown script")
    assert await client.eval(COUNT_AND_LOG, 2, COUNTER, LOG, "whole") == b"4"


@pytest.mark.parametrize("retries", [0, 3])
async def test_a_timed_out_script_runs_again_unless_retries_are_off(
    redis_cluster: RedisClusterSet, retries: int
) -> None:
    """With retries (the client's default is 3) a command is sent again after a timeout,
    whether or not it ran: a publish script would publish twice. The engine's have none."""
    rc = cluster_client(redis_cluster, retries, socket_timeout=0.3)
    with pytest.raises(RedisTimeoutError):
        await rc.eval(SLOW_COUNT, 1, COUNTER)
    await rc.aclose()
    owner = redis_cluster.owner(SLOT)
    if retries:
        await until(lambda: int(owner.call("GET", COUNTER)) > 1, "the script run again")
    else:
        assert int(owner.call("GET", COUNTER)) == 1  # answered once the one run has ended
