"""A real Sentinel set on loopback for the Sentinel tests: a master, its replica, three sentinels.

Each sentinel is `redis-server CONFIG --sentinel` with a config file of its own (Sentinel
writes what it learns there), watching the master with a quorum of 2 and a short
`down-after-milliseconds`. The helpers fail the master over the two ways a deployment sees:
`SENTINEL FAILOVER` (the master alive, demoted afterwards) and a SIGKILL of the master; each
waits until every sentinel names the new master and the new master says it is one.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .redis_fixture import REDIS_SERVER, REPLICATION, RedisServer, poll

MASTER_NAME = "pushmaster"
DOWN_AFTER_MS = 1000
"""`down-after-milliseconds`: a master silent this long is subjectively down."""
FAILOVER_TIMEOUT_MS = 5000
"""`failover-timeout`: also how long sentinels wait before trying a failed failover again."""
SETTLE = 30.0


class SentinelServer(RedisServer):
    """One sentinel; its config file is written once, then kept (and rewritten) by Sentinel."""

    def __init__(self, master_port: int) -> None:
        super().__init__()
        self.master_port = master_port

    def command(self) -> list[str]:
        if not self.config_file.exists() or not self.config_file.read_text():
            self.config_file.write_text(
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
        return [
            REDIS_SERVER or "redis-server",
            str(self.config_file),
            "--sentinel",
            *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir.name),
        ]

    def call(self, *command: Any) -> Any:
        with self.client() as client:
            return client.execute_command(*command)

    def master_port_now(self) -> int:
        _, port = self.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return int(port)


def role(server: RedisServer) -> tuple[str, str | None]:
    """The server's role, and for a replica the state of its link to its master."""
    with server.client() as client:
        info = client.info("replication")
    return info["role"], info.get("master_link_status")


class SentinelSet:
    """A master, one replica and three sentinels, and the failovers tests put them through."""

    def __init__(self) -> None:
        self.master = RedisServer(REPLICATION)
        self.replica = RedisServer(REPLICATION)
        self.sentinels: list[SentinelServer] = []

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{seeds}/{MASTER_NAME}/0"

    @property
    def servers(self) -> list[RedisServer]:
        return [self.master, self.replica]

    def start(self) -> SentinelSet:
        self.master.start()
        self.replica.start()
        with self.replica.client() as client:
            client.replicaof("127.0.0.1", self.master.port)
        self.wait(lambda: role(self.replica) == ("slave", "up"), "the replica synced")
        self.sentinels = [SentinelServer(self.master.port).start() for _ in range(3)]
        self.wait(self._watching, "the sentinels know the replica and each other")
        return self

    def stop(self) -> None:
        for server in (*self.sentinels, *self.servers):
            server.stop(signal.SIGKILL)
            server.dir.cleanup()

    def _watching(self) -> bool:
        for sentinel in self.sentinels:
            if sentinel.master_port_now() != self.master.port:
                return False
            if len(sentinel.call("SENTINEL", "REPLICAS", MASTER_NAME)) != 1:
                return False
            if len(sentinel.call("SENTINEL", "SENTINELS", MASTER_NAME)) != 2:
                return False
        return True

    def wait(self, done: Callable[[], bool], what: str) -> None:
        poll(done, what, SETTLE)

    def promoted(self, new: RedisServer) -> bool:
        """`new` says it is a master and every live sentinel names it."""
        live = [s for s in self.sentinels if s.proc is not None]
        return role(new)[0] == "master" and all(s.master_port_now() == new.port for s in live)

    def start_failover(self) -> tuple[RedisServer, RedisServer]:
        """`SENTINEL FAILOVER`, not waited for; returns the master and the replica it promotes.
        The old master, still up, is told to replicate the new one only once a sentinel sees it
        still claiming to be master: seconds after the promotion, and meanwhile it accepts
        writes the new master never gets."""
        old, new = self.master, self.replica
        self.sentinels[0].call("SENTINEL", "FAILOVER", MASTER_NAME)
        self.master, self.replica = new, old
        return old, new

    def wait_promoted(self, new: RedisServer) -> None:
        self.wait(lambda: self.promoted(new), "the replica promoted")

    def wait_demoted(self, old: RedisServer) -> None:
        self.wait(lambda: role(old) == ("slave", "up"), "the old master demoted")
        self.wait(self._watching, "the sentinels settled")

    def failover(self) -> None:
        """`SENTINEL FAILOVER`, waited for to the end: the old master replicates the new."""
        old, new = self.start_failover()
        self.wait_promoted(new)
        self.wait_demoted(old)

    def kill_master(self) -> RedisServer:
        """SIGKILL the master and wait until the sentinels promote the replica; returns the
        killed server, which stays down (`revive` starts it as a replica)."""
        old, new = self.master, self.replica
        old.stop(signal.SIGKILL)
        self.wait_promoted(new)
        self.master, self.replica = new, old
        return old

    def revive(self, server: RedisServer) -> None:
        """Start a killed server again on its port, empty; the sentinels make it a replica."""
        server.start(server.port)
        self.wait(lambda: role(server) == ("slave", "up"), "the old master back as a replica")
        self.wait(self._watching, "the sentinels settled")


@contextlib.contextmanager
def running_sentinels() -> Iterator[SentinelSet]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    sentinels = SentinelSet()
    try:
        yield sentinels.start()
    finally:
        sentinels.stop()


@pytest.fixture(name="redis_sentinels")
def redis_sentinels_fixture() -> Iterator[SentinelSet]:
    """A fresh Sentinel set per test; import this into a test module to use it."""
    with running_sentinels() as sentinels:
        yield sentinels
