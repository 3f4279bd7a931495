"""The Sentinel engine end to end: real pushserver processes on a real Sentinel set (three
sentinels; see redis_sentinel.py), through a failover Sentinel is asked for and one it makes when
the master is killed.

Under keyed publishes through one node to subscribers on another: every acknowledged message
reaches each subscriber once and in order, no id is handed out twice, and both nodes are healthy
again afterwards. During `SENTINEL FAILOVER` the old master goes on accepting writes for seconds;
the engine leaves it as soon as the sentinels name the new one, and a publish that reached it
meanwhile finds no replica to wait for (`WAIT 1`, one replica), so it is refused, never
acknowledged and lost. With two replicas the one Sentinel has not yet pointed at the new master
still answers the old master's `WAIT 1`, so `WAIT 1` is not trusted there: every failover ends
the channel's epoch (test_redis_lagging_failover.py); these runs use `WAIT` for every replica
and lose nothing: the requested failover on one replica, the kill on two with
`--redis-replicas 2` (publishes wait until the killed master is back as a replica).
"""

from __future__ import annotations

from collections.abc import Callable

from pushserver.launcher import ServerProcess

from ...redis_sentinel import SentinelSet, redis_sentinels_fixture, running_sentinels  # noqa: F401
from .test_redis_cluster_engine import run_through


async def test_a_requested_failover_is_followed_before_the_old_master_is_demoted(
    server_factory: Callable[..., ServerProcess],
) -> None:
    with running_sentinels(replicas=1) as sentinels:
        await run_through(sentinels.url, server_factory, "watched", sentinels.failover)


async def test_a_killed_master_is_followed_to_the_promoted_replica(
    redis_sentinels: SentinelSet, server_factory: Callable[..., ServerProcess]
) -> None:
    def kill_and_revive() -> None:
        redis_sentinels.revive(redis_sentinels.kill_master())

    await run_through(
        redis_sentinels.url, server_factory, "watched", kill_and_revive, "--redis-replicas", "2"
    )
