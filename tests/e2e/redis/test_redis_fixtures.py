"""The real Redis topologies the cluster and Sentinel tests stand on do what their helpers say:
the layout they start with, and a killed primary or master back as a replica of its successor
(what the long failover runs do three times a run)."""

from __future__ import annotations

from ...redis_cluster import RedisClusterSet, redis_cluster_fixture  # noqa: F401
from ...redis_sentinel import SentinelSet, redis_sentinels_fixture, role  # noqa: F401


def test_a_cluster_of_three_primaries_each_with_a_replica_takes_back_a_killed_one(
    redis_cluster: RedisClusterSet,
) -> None:
    views = redis_cluster.views()
    primaries = [v for v in views if v.is_primary]
    assert len(views) == 6 and len(primaries) == 3
    assert sorted(len(v.slots) for v in primaries) == [5461, 5461, 5462]
    assert sum(len(v.slots) for v in primaries) == 16384
    assert {v.primary for v in views if not v.is_primary} == {v.id for v in primaries}

    killed, successor = redis_cluster.kill_primary(0)
    assert redis_cluster.owner(0) is successor and not killed.alive
    redis_cluster.revive(killed)
    (view,) = [v for v in redis_cluster.views() if v.port == killed.port]
    assert not view.is_primary and view.primary == successor.node_id()
    assert killed.replication()["master_link_status"] == "up"


def test_a_sentinel_set_takes_back_a_killed_master_as_a_replica(
    redis_sentinels: SentinelSet,
) -> None:
    first = redis_sentinels.master
    assert role(first) == ("master", None) and role(redis_sentinels.replica) == ("slave", "up")
    killed = redis_sentinels.kill_master()
    assert killed is first and redis_sentinels.master is not first
    redis_sentinels.revive(killed)
    assert role(killed) == ("slave", "up") and redis_sentinels.replica is killed
    assert all(
        s.master_port_now() == redis_sentinels.master.port for s in redis_sentinels.sentinels
    )
