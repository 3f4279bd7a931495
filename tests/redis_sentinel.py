"""A real Sentinel set on loopback for the Sentinel tests: a master, two replicas, three sentinels.

Each sentinel is `redis-server CONFIG --sentinel` with a config file of its own (Sentinel
writes what it learns there), watching the master with a quorum of 2 and a short
`down-after-milliseconds`. The helpers fail the master over the two ways a deployment sees:
`SENTINEL FAILOVER` (the master alive, demoted afterwards) and a SIGKILL of the master; each
waits until every sentinel names the new master and the new master says it is one (which
replica that is, Sentinel decides).
"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .redis_fixture import REDIS_SERVER, REPLICATION, RedisServer, lag_behind, poll

MASTER_NAME = "pushmaster"
DOWN_AFTER_MS = 2000
"""`down-after-milliseconds`: a master silent this long is subjectively down. At 1 s, on a
loaded machine (the test command's other workers), twice a set whose killed master had been revived
never settled: a sentinel named the revived server as master. Read as a second failover
after the new master stalled past 1 s, not confirmed; `wait`'s error now quotes what each
sentinel logged of the master."""
FAILOVER_TIMEOUT_MS = 5000
"""`failover-timeout`: also how long sentinels wait before trying a failed failover again."""
SETTLE = 30.0
MASTER_EVENTS = re.compile(r"[+-](sdown|odown) master |\+switch-master |\+failover-end ")
"""The lines of a sentinel's log that say what happened to the master."""


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
            *("--logfile", str(self.log_file)),
        ]

    @property
    def log_file(self) -> Path:
        return Path(self.dir.name) / "sentinel.log"

    def failovers(self) -> str:
        """The master's events this sentinel logged (down, failed over, switched), the last
        few: what a set that did not settle went through."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        events = [line.split(" # ")[-1] for line in lines if MASTER_EVENTS.search(line)]
        return " | ".join(events[-6:]) or "none"

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
    """A master, its replicas (two by default) and three sentinels, and the failovers tests put
    them through. With two replicas the promoted one has a replica again as soon as Sentinel
    points the other at it, so a `WAIT 1` publish goes through within the failover; with one it
    waits until the old master is demoted or revived."""

    def __init__(
        self,
        replicas: int = 2,
        debug: Mapping[str, int] | None = None,
        priorities: Sequence[int] = (),
    ) -> None:
        self.debug = dict(debug or {})
        """`SENTINEL DEBUG` settings for every sentinel. A sentinel tells a master it no longer
        names to replicate the new one only once it has seen it claim the role for 4 times its
        `PUBLISH-PERIOD` (2 s by default), seen by `INFO` every `INFO-PERIOD` (10 s): what a
        requested failover's old master stays master for (about 10 s; 2 s with 250 and 1000)."""
        self.master = RedisServer(REPLICATION)
        priority = [("--replica-priority", str(p)) for p in priorities]
        priority += [()] * (replicas - len(priority))
        """`replica-priority` of each replica (lower is promoted first), from the start so every
        sentinel knows it."""
        self.replicas = [RedisServer((*REPLICATION, *p)) for p in priority]
        self.sentinels: list[SentinelServer] = []
        self.seen = ""
        """What last kept a `wait` from being done."""

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{seeds}/{MASTER_NAME}/0"

    @property
    def servers(self) -> list[RedisServer]:
        return [self.master, *self.replicas]

    def start(self) -> SentinelSet:
        self.master.start()
        for replica in self.replicas:
            replica.start()
            with replica.client() as client:
                client.replicaof("127.0.0.1", self.master.port)
        self.wait(self._replicating, "the replicas synced")
        self.sentinels = [SentinelServer(self.master.port).start() for _ in range(3)]
        for sentinel in self.sentinels:
            for setting, value in self.debug.items():
                sentinel.call("SENTINEL", "DEBUG", setting, value)
        self.wait(self._watching, "the sentinels know the replicas and each other")
        return self

    def stop(self) -> None:
        for server in (*self.sentinels, *self.servers):
            server.stop(signal.SIGKILL)
            server.dir.cleanup()

    def _replicating(self) -> bool:
        """Every replica's link to the current master is up."""
        for replica in self.replicas:
            with replica.client() as client:
                info = client.info("replication")
            if info["role"] != "slave" or info["master_port"] != self.master.port:
                return self._saw(f"{replica.port} is {info['role']}, not {self.master.port}'s")
            if info["master_link_status"] != "up":
                return self._saw(f"{replica.port}'s link to {self.master.port} is down")
        return True

    def _watching(self) -> bool:
        for sentinel in self.sentinels:
            named = sentinel.master_port_now()
            if named != self.master.port:
                return self._saw(f"sentinel {sentinel.port} names {named}, not {self.master.port}")
            replicas = sentinel.call("SENTINEL", "REPLICAS", MASTER_NAME)
            if len(replicas) != len(self.replicas):
                return self._saw(f"sentinel {sentinel.port} knows replicas {replicas}")
            others = len(sentinel.call("SENTINEL", "SENTINELS", MASTER_NAME))
            if others != 2:
                return self._saw(f"sentinel {sentinel.port} knows {others} other sentinels")
        return self._replicating()

    def _saw(self, what: str) -> bool:
        self.seen = what
        return False

    def wait(self, done: Callable[[], bool], what: str) -> None:
        """`poll` for `done`; failing, with the last thing that kept it false."""
        self.seen = ""
        try:
            poll(done, what, SETTLE)
        except TimeoutError as exc:
            seen = self.seen or "an error"
            logged = "; ".join(f"sentinel {s.port}: {s.failovers()}" for s in self.sentinels)
            raise TimeoutError(f"{exc}; last seen: {seen}; the master's events: {logged}") from None

    def _successor(self, old: RedisServer) -> RedisServer | None:
        """The replica every live sentinel names as master instead of `old`, once it says it
        is one."""
        named = {s.master_port_now() for s in self.sentinels if s.proc is not None}
        if len(named) != 1 or old.port in named:
            return None
        new = next((r for r in self.servers if r.port in named), None)
        return new if new is not None and role(new)[0] == "master" else None

    def start_failover(self) -> RedisServer:
        """`SENTINEL FAILOVER`, not waited for; returns the master it demotes. The old master,
        still up, is told to replicate the new one only once a sentinel sees it still claiming
        to be master: seconds after the promotion, and meanwhile it accepts writes the new
        master never gets."""
        self.sentinels[0].call("SENTINEL", "FAILOVER", MASTER_NAME)
        return self.master

    def wait_promoted(self, old: RedisServer) -> RedisServer:
        """Wait until a replica of `old` is master for every sentinel; returns it (Sentinel
        picks it: priority, then replication offset)."""
        found: list[RedisServer] = []

        def promoted() -> bool:
            new = self._successor(old)
            found.extend([new] if new is not None else [])
            return bool(found)

        self.wait(promoted, "a replica promoted")
        new = found[0]
        self.master = new
        self.replicas = [s for s in (old, *self.replicas) if s is not new]
        return new

    def wait_demoted(self, old: RedisServer) -> None:
        self.wait(lambda: role(old) == ("slave", "up"), "the old master demoted")
        self.wait(self._watching, "the sentinels settled")

    def failover(self) -> tuple[RedisServer, RedisServer]:
        """`SENTINEL FAILOVER`, waited for to the end (every other server replicates the new
        master); returns the old master and the new."""
        old = self.start_failover()
        new = self.wait_promoted(old)
        self.wait_demoted(old)
        return old, new

    def failover_to_lagging(self, written: Callable[[RedisServer], bool]) -> RedisServer:
        """`SENTINEL FAILOVER` to a replica that lacks writes the other replica holds (the set
        needs two, and the first the higher priority, so Sentinel picks it whatever its offset;
        see `lag_behind`, `written(master)` says when): the other replica is pointed at the
        promoted one and resyncs, losing those writes; the old master is killed and comes back
        as a replica. Returns the new master."""
        old, lagging = self.master, self.replicas[0]
        lag_behind(old, lagging, written)
        self.sentinels[0].call("SENTINEL", "FAILOVER", MASTER_NAME)
        new = self.wait_promoted(old)
        assert new is lagging, f"Sentinel promoted {new.port}, not the lagging {lagging.port}"
        old.stop(signal.SIGKILL)
        self.revive(old)
        return new

    def kill_master(self) -> RedisServer:
        """SIGKILL the master and wait until the sentinels promote a replica; returns the
        killed server, which stays down (`revive` starts it as a replica)."""
        old = self.master
        old.stop(signal.SIGKILL)
        self.wait_promoted(old)
        return old

    def revive(self, server: RedisServer) -> None:
        """Start a killed server again on its port, empty; the sentinels make it a replica."""
        server.start(server.port)
        self.wait(lambda: role(server) == ("slave", "up"), "the old master back as a replica")
        self.wait(self._watching, "the sentinels settled")


@contextlib.contextmanager
def running_sentinels(
    replicas: int = 2, debug: Mapping[str, int] | None = None, priorities: Sequence[int] = ()
) -> Iterator[SentinelSet]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    sentinels = SentinelSet(replicas, debug, priorities)
    try:
        yield sentinels.start()
    finally:
        sentinels.stop()


@pytest.fixture(name="redis_sentinels")
def redis_sentinels_fixture() -> Iterator[SentinelSet]:
    """A fresh Sentinel set per test; import this into a test module to use it."""
    with running_sentinels() as sentinels:
        yield sentinels
