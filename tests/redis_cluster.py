"""A real Redis Cluster on loopback for the cluster tests: three primaries, a replica each.

Six `redis-server --cluster-enabled yes` on ephemeral ports (each with its bus port chosen too:
the default, port + 10000, may be past 65535 or taken), joined by `redis-cli --cluster create`,
with a short `cluster-node-timeout` so a killed primary's replica takes over in seconds. The
helpers change the topology the ways a deployment's does: a primary killed (its replica
promoted, then the old one back as a replica), a manual `CLUSTER FAILOVER`, a slot migrated
(`CLUSTER SETSLOT ... IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT ... NODE`), each waiting until
every live node agrees on the result.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import pytest
from redis.crc import key_slot

from pushserver_measure.ports import free_port

from .redis_fixture import REDIS_SERVER, REPLICATION, RedisServer, lag_behind, poll

NODE_TIMEOUT_MS = 1000
"""`cluster-node-timeout`: a primary silent this long is suspected, and failed over soon after."""
SETTLE = 30.0
"""Seconds a topology change may take to be agreed by every live node before a helper fails."""


class ClusterNode(RedisServer):
    """One cluster member; its bus port stays with it across restarts, so it rejoins."""

    def __init__(self, args: Sequence[str] = ()) -> None:
        super().__init__(args)
        self.bus_port = 0

    def pick_ports(self, port: int | None) -> None:
        super().pick_ports(port)
        if port is None or not self.bus_port:
            self.bus_port = free_port()

    def command(self) -> list[str]:
        return [
            *super().command(),
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-port", str(self.bus_port)),
        ]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def call(self, *command: Any) -> Any:
        with self.client() as client:
            return client.execute_command(*command)

    def replication(self) -> dict[str, Any]:
        with self.client() as client:
            return client.info("replication")

    def node_id(self) -> str:
        return str(self.call("CLUSTER", "MYID").decode())


class View(NamedTuple):
    """One line of `CLUSTER NODES` as a node sees it."""

    id: str
    port: int
    flags: frozenset[str]
    primary: str
    """The id of its primary, "-" for a primary."""
    slots: frozenset[int]

    @property
    def is_primary(self) -> bool:
        return "master" in self.flags

    @property
    def failed(self) -> bool:
        return bool(self.flags & {"fail", "fail?", "handshake", "noaddr"})


def parse_nodes(text: str) -> list[View]:
    """`CLUSTER NODES`: id addr flags primary ping pong epoch link slot...; a slot being moved
    (`[N->-id]`, `[N-<-id]`) still belongs to its owner, and is not listed as such."""
    views = []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        slots: set[int] = set()
        for part in fields[8:]:
            if part.startswith("["):
                continue
            first, _, last = part.partition("-")
            slots.update(range(int(first), int(last or first) + 1))
        port = int(fields[1].split("@")[0].rsplit(":", 1)[1] or 0)
        flags = frozenset(fields[2].split(",")) - {"myself"}
        views.append(View(fields[0], port, flags, fields[3], frozenset(slots)))
    return views


def channel_in_slot(slot: int, prefix: str = "c") -> str:
    """A channel name whose key slot is `slot` (names hash as a whole: no `{` in them)."""
    n = 0
    while key_slot(f"{prefix}{n}".encode()) != slot:
        n += 1
    return f"{prefix}{n}"


class Migration:
    """A slot on its way from one primary to another, stopped at any step a test wants."""

    def __init__(self, cluster: RedisClusterSet, slot: int, target: ClusterNode) -> None:
        self.cluster = cluster
        self.slot = slot
        self.source = cluster.owner(slot)
        self.target = target
        if self.source is target:
            raise ValueError(f"slot {slot} is already on {target.address}")
        self.source_id, self.target_id = self.source.node_id(), target.node_id()
        target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", self.source_id)
        self.source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", self.target_id)

    def move_keys(self, batch: int = 100) -> int:
        """MIGRATE every key of the slot to the target, `batch` keys a call; how many moved."""
        moved = 0
        while keys := self.source.call("CLUSTER", "GETKEYSINSLOT", self.slot, batch):
            self.source.call("MIGRATE", "127.0.0.1", self.target.port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
        return moved

    def finish(self) -> None:
        """Give the slot to the target: the target first, then the source (whose subscribers
        to the slot's shard channels are told `sunsubscribe` then), then every other primary."""
        self.move_keys()
        for node in (self.target, self.source, *self.cluster.primaries()):
            if node.alive:
                node.call("CLUSTER", "SETSLOT", self.slot, "NODE", self.target_id)
        self.cluster.wait(
            lambda: self.cluster.owner(self.slot) is self.target, f"slot {self.slot} moved"
        )


class RedisClusterSet:
    """The cluster's nodes, and the topology changes tests put them through."""

    def __init__(self, primaries: int = 3, replicas: int = 1, args: Sequence[str] = ()) -> None:
        node_args = (
            *("--cluster-node-timeout", str(NODE_TIMEOUT_MS)),
            # a replica may take over however long its link was down (tests kill things)
            *("--cluster-replica-validity-factor", "0"),
            *REPLICATION,
            *args,
        )
        self.primaries_wanted = primaries
        self.replicas = replicas
        self.nodes = [ClusterNode(node_args) for _ in range(primaries * (1 + replicas))]
        self.paused: set[ClusterNode] = set()

    @property
    def seeds(self) -> str:
        """host:port of every node, comma-separated, as `redis+cluster://` takes them."""
        return ",".join(node.address for node in self.nodes)

    @property
    def url(self) -> str:
        return f"redis+cluster://{self.seeds}"

    def start(self) -> RedisClusterSet:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [
                *("redis-cli", "--cluster", "create", *(node.address for node in self.nodes)),
                *("--cluster-replicas", str(self.replicas), "--cluster-yes"),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait(self._settled, "the cluster formed")
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(signal.SIGKILL)
            node.dir.cleanup()

    # -- what the nodes agree on ----------------------------------------------------------------

    def live(self) -> list[ClusterNode]:
        """The nodes running and not paused (`takeover_lagging`)."""
        return [node for node in self.nodes if node.alive and node not in self.paused]

    def views(self, node: ClusterNode | None = None) -> list[View]:
        """The topology as `node` (or the first live node) sees it."""
        node = node or self.live()[0]
        return parse_nodes(node.call("CLUSTER", "NODES").decode())

    def by_port(self, port: int) -> ClusterNode:
        return next(node for node in self.nodes if node.port == port)

    def owner(self, slot: int) -> ClusterNode:
        """The primary serving `slot`, as the first live node sees it."""
        for view in self.views():
            if view.is_primary and slot in view.slots:
                return self.by_port(view.port)
        raise LookupError(f"no primary serves slot {slot}")

    def primaries(self) -> list[ClusterNode]:
        return [self.by_port(v.port) for v in self.views() if v.is_primary and not v.failed]

    def replica_of(self, primary: ClusterNode) -> ClusterNode:
        return self.replicas_of(primary)[0]

    def replicas_of(self, primary: ClusterNode) -> list[ClusterNode]:
        """The live replicas of `primary`, at least one."""
        primary_id = primary.node_id()
        found = [
            self.by_port(view.port)
            for view in self.views()
            if view.primary == primary_id and not view.failed
        ]
        if not found:
            raise LookupError(f"{primary.address} has no live replica")
        return found

    def _settled(self) -> bool:
        """Every live node says the cluster is ok, they agree on who serves every slot, and each
        replica's link to its primary is up."""
        layouts = set()
        for node in self.live():
            info = node.call("CLUSTER", "INFO").decode()
            if "cluster_state:ok" not in info:
                return False
            views = self.views(node)
            live_ports = {n.port for n in self.live()}
            layout = frozenset(
                (v.port, v.slots) for v in views if v.is_primary and v.port in live_ports
            )
            if sum(len(slots) for _, slots in layout) != 16384:
                return False
            layouts.add(layout)
            if any(v.port in live_ports and v.failed for v in views):
                return False
            role = node.replication()
            if role["role"] == "slave" and role.get("master_link_status") != "up":
                return False
        return len(layouts) == 1 and len(next(iter(layouts))) == self.primaries_wanted

    def wait(self, done: Callable[[], bool], what: str) -> None:
        poll(done, what, SETTLE)

    def settle(self) -> None:
        self.wait(self._settled, "the cluster settled")

    # -- topology changes -------------------------------------------------------------------------

    def kill_primary(self, slot: int) -> tuple[ClusterNode, ClusterNode]:
        """SIGKILL the primary serving `slot` and wait until its replica serves it; returns the
        killed node and the promoted one. The killed node stays down (see `revive`)."""
        old = self.owner(slot)
        successor = self.replica_of(old)
        old.stop(signal.SIGKILL)
        self.wait(lambda: self.owner(slot) is successor, f"{successor.address} promoted")
        self.settle()
        return old, successor

    def revive(self, node: ClusterNode) -> None:
        """Start a killed node again on its ports: it rejoins as a replica of its successor."""
        node.start(node.port)
        self.settle()

    def failover(self, slot: int, how: str = "") -> tuple[ClusterNode, ClusterNode]:
        """`CLUSTER FAILOVER [FORCE|TAKEOVER]` on the replica of the primary serving `slot`;
        returns the old primary and the new. Without `how` the primary hands over: it stops
        writes until the replica has everything, so nothing acknowledged is lost."""
        old = self.owner(slot)
        successor = self.replica_of(old)
        successor.call("CLUSTER", "FAILOVER", *([how] if how else []))
        self.wait(lambda: self.owner(slot) is successor, f"{successor.address} took over")
        self.settle()
        return old, successor

    def takeover_lagging(
        self, slot: int, written: Callable[[ClusterNode], bool]
    ) -> tuple[ClusterNode, ClusterNode]:
        """`CLUSTER FAILOVER TAKEOVER` on a replica that lacks writes another replica holds (the
        primary needs two; see `lag_behind`, `written(primary)` says when): the other replica
        follows it and resyncs, losing those writes. The old primary is killed and comes back
        as a replica. Returns the old primary and the new."""
        old = self.owner(slot)
        lagging = self.replicas_of(old)[0]
        self.paused |= {old, lagging}
        try:
            lag_behind(old, lagging, written)
        finally:
            self.paused.discard(lagging)
        lagging.call("CLUSTER", "FAILOVER", "TAKEOVER")
        self.wait(lambda: self.owner(slot) is lagging, f"{lagging.address} took over")
        old.stop(signal.SIGKILL)
        self.paused.discard(old)
        self.revive(old)
        return old, lagging

    def migrate(self, slot: int, target: ClusterNode) -> Migration:
        """Start moving `slot` to `target` (IMPORTING, MIGRATING); the keys move and the slot
        changes hands with the returned migration's `move_keys` and `finish`."""
        return Migration(self, slot, target)


@contextlib.contextmanager
def running_cluster(*args: str, replicas: int = 1) -> Iterator[RedisClusterSet]:
    """A cluster started with `args` for each node and `replicas` per primary, killed and
    cleaned up after."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    cluster = RedisClusterSet(replicas=replicas, args=args)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(name="redis_cluster")
def redis_cluster_fixture() -> Iterator[RedisClusterSet]:
    """A fresh cluster per test; import this into a test module to use `redis_cluster`."""
    with running_cluster() as cluster:
        yield cluster
