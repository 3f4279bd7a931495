"""The engine on a Redis Cluster: every channel lives in one slot, and travels by sharded pub/sub.

A channel's keys and its shard channel carry its name as a hash tag (`scripts.TaggedKeys`), so one
primary holds all of it: the script that publishes runs there, and SPUBLISH reaches only the nodes
that SSUBSCRIBEd there, instead of every node of the cluster as PUBLISH does. Each primary is a
`Shard`: one read pool, one publishing connection, one SSUBSCRIBE link.

Where a slot is comes from redis-py's slot map (`RedisCluster`, retries off), refreshed every few
seconds, at once when a command is redirected (MOVED, ASK, TRYAGAIN) or a primary pushes a
`sunsubscribe` (its slot left it: a migration or a failover), and twice a second while a shard is
down. A channel whose slot changed hands is subscribed on its new primary and read there, so what
was published between the two reaches its subscribers. A channel whose primary cannot be reached
answers 503 `broker_down`; the other shards go on serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from ...config import Settings
from ...redis_urls import RedisTarget
from .engine import Engine
from .following import read_generation
from .scripts import TaggedKeys, slot_tags
from .shard import POOL_OPTIONS, Shard, closed

log = logging.getLogger("pushserver.redis")

TOPOLOGY_INTERVAL = 5.0
"""Seconds between slot map refreshes while every shard is up."""
TOPOLOGY_RETRY = 0.5
"""Seconds between refreshes while a shard is down (a failover takes cluster-node-timeout)."""


def node_url(target: RedisTarget, host: str, port: int) -> str:
    return f"{'rediss' if target.tls else 'redis'}://{host}:{port}/0"


class ClusterBroker(Engine):
    name = "redis-cluster"
    keys = TaggedKeys()
    notify = "SPUBLISH"
    sharded = True

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.target = settings.redis_target
        self.credentials: dict[str, Any] = {
            "username": self.target.username,
            "password": self.target.password,
        }
        self.cluster = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in self.target.hosts],
            ssl=self.target.tls,
            protocol=2,
            retry=POOL_OPTIONS["retry"],
            socket_timeout=POOL_OPTIONS["socket_timeout"],
            socket_connect_timeout=POOL_OPTIONS["socket_connect_timeout"],
            **self.credentials,
        )
        self.by_node: dict[str, Shard] = {}
        self._changed = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self._mapped = asyncio.Event()
        slot_tags()  # once, before serving

    @property
    def shards(self) -> list[Shard]:
        return list(self.by_node.values())

    def node(self, name: str) -> Shard | None:
        """The primary a redirect names; the map that sent the command there is read again."""
        self._changed.set()
        return self.by_node.get(name)

    def shard_of(self, name: str) -> Shard | None:
        try:
            node = self.cluster.get_node_from_key(self.keys.channel(name)[0])
        except (RedisError, LookupError):
            return None
        return None if node is None else self.by_node.get(node.name)

    @property
    def healthy(self) -> bool:
        """Some primary can be published to: a shard that is down answers its own channels'
        requests 503, and taking the node out of a load balancer would not help them (every
        node is cut off from that shard alike)."""
        return any(shard.link.up for shard in self.shards)

    def slot_of(self, name: str) -> int:
        return key_slot(name.encode())

    def trusted(self) -> str:
        """Also every live primary's lineage: a slot migrated from one of them lost nothing."""
        lineages = " ".join(self.lineages.values())
        return f"{super().trusted()} {lineages}"

    def unrouted(self, exc: BaseException) -> None:
        log.debug("Redis Cluster redirected or refused a command: %r", exc)
        self._changed.set()

    def _moved(self, shard: Shard, slot: int, topic: bytes | None) -> None:
        """Read the slot map again when a primary dropped or refused a channel followed there
        (not for the answer to our own SUNSUBSCRIBE): `rehome` then subscribes it again."""
        if self.dropped(shard, slot, topic):
            self._changed.set()

    async def generation(self, shard: Shard) -> str:
        """One key for the cluster, on whichever primary holds its slot."""
        return await read_generation(self.cluster)

    # -- topology -------------------------------------------------------------------------------

    async def start(self) -> None:
        self._watcher = asyncio.create_task(self._watch())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._mapped.wait(), TOPOLOGY_INTERVAL)

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await super().stop()
        with contextlib.suppress(RedisError, OSError):
            await self.cluster.aclose()

    async def _watch(self) -> None:
        failing = False
        while True:
            self._changed.clear()
            try:
                await self._remap()
            except (RedisError, OSError) as exc:
                if not failing:
                    log.warning("Redis Cluster slot map unavailable (%s); retrying", exc)
                failing = True
            else:
                failing = False
            self._mapped.set()
            whole = self.shards and all(shard.link.up for shard in self.shards)
            delay = TOPOLOGY_INTERVAL if whole else TOPOLOGY_RETRY
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), delay)

    async def _remap(self) -> None:
        """Refresh the slot map; open a shard for each new primary, move every channel whose
        slot changed hands, close the shards of nodes that no longer serve slots."""
        if self.by_node:
            await self.cluster.nodes_manager.initialize()
        else:
            await self.cluster.initialize()  # the client's own start, then the same map
        primaries = {node.name: node for node in self.cluster.get_primaries()}
        for name, node in primaries.items():
            if name not in self.by_node:
                url = node_url(self.target, node.host, int(node.port))
                self.by_node[name] = self.open_node(url, name, **self.credentials)
                await self.by_node[name].link.start()
        for shard in self.by_node.values():
            with contextlib.suppress(RedisError, OSError):
                await self.observe(shard)
        self.rehome()
        for name in [n for n in self.by_node if n not in primaries]:
            self.lineages.pop(name, None)
            self.spawn(self.by_node.pop(name).close(closed))
