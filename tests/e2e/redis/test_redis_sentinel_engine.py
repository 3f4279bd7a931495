"""The Sentinel engine end to end: real pushserver processes on a real Sentinel set (a master,
a replica, three sentinels; see redis_sentinel.py), through a failover Sentinel is asked for and
one it makes when the master is killed.

Under keyed publishes through one node to subscribers on another: every acknowledged message
reaches each subscriber once and in order, no id is handed out twice, and both nodes are healthy
again afterwards. During `SENTINEL FAILOVER` the old master goes on accepting writes for seconds;
the engine leaves it as soon as the sentinels name the new one, and a publish that reached it
meanwhile finds no replica to wait for, so it is refused, never acknowledged and lost.
"""

from __future__ import annotations

from collections.abc import Callable

from pushserver.launcher import ServerProcess

from ...redis_sentinel import SentinelSet, redis_sentinels_fixture  # noqa: F401
from .test_redis_cluster_engine import run_through


async def test_a_requested_failover_is_followed_before_the_old_master_is_demoted(
    redis_sentinels: SentinelSet, server_factory: Callable[..., ServerProcess]
) -> None:
    await run_through(redis_sentinels.url, server_factory, "watched", redis_sentinels.failover)


async def test_a_killed_master_is_followed_to_the_promoted_replica(
    redis_sentinels: SentinelSet, server_factory: Callable[..., ServerProcess]
) -> None:
    def kill_and_revive() -> None:
        redis_sentinels.revive(redis_sentinels.kill_master())

    await run_through(redis_sentinels.url, server_factory, "watched", kill_and_revive)
