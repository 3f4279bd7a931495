"""A real redis-server on an ephemeral loopback port, for the Redis broker tests.

Started without persistence (`--save '' --appendonly no`), so a restart is a Redis that lost its
data, as after a crash of a cache-only deployment.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis

from pushserver_measure.ports import free_port

REDIS_SERVER = shutil.which("redis-server")
REPLICATION = ("--repl-diskless-sync-delay", "0")
"""For a primary with replicas: a replica's first sync starts at once (the default waits 5 s
for more replicas to share it)."""


class RedisServer:
    def __init__(self, args: Sequence[str] = ()) -> None:
        self.args = tuple(args)
        """More options for redis-server (a password, a Unix socket, TLS)."""
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = tempfile.TemporaryDirectory(prefix="pushserver-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    @property
    def config_file(self) -> Path:
        """Empty at first: a Sentinel that reconfigures this server saves its role there
        (`CONFIG REWRITE`), and a restart on the same port reads it back."""
        return Path(self.dir.name) / "redis.conf"

    def pick_ports(self, port: int | None) -> None:
        """The ports of one attempt to start: `port`, or a free one."""
        self.port = port or free_port()

    def command(self) -> list[str]:
        if not self.config_file.exists():
            self.config_file.touch()
        return [
            REDIS_SERVER or "redis-server",
            str(self.config_file),
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", self.dir.name),
            *self.args,
        ]

    def start(self, port: int | None = None, timeout: float = 10.0) -> RedisServer:
        """Start on `port` (a free one if None) and wait until it answers PING."""
        deadline = time.monotonic() + timeout
        while True:
            self.pick_ports(port)
            self.proc = subprocess.Popen(
                self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            while self.proc.poll() is None and time.monotonic() < deadline:
                if self._pong():
                    return self
                time.sleep(0.02)
            self.stop(signal.SIGKILL)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))  # up, with a password
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        """Start again on the same port, empty."""
        self.start(self.port)


@contextlib.contextmanager
def running(*args: str) -> Iterator[RedisServer]:
    """A Redis started with `args` (see `RedisServer.args`), killed and cleaned up after."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    server = RedisServer(args).start()
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)
        server.dir.cleanup()


@pytest.fixture(name="redis_server")
def redis_server_fixture() -> Iterator[RedisServer]:
    """A fresh Redis per test; import this into a test module to use `redis_server`."""
    with running() as server:
        yield server


def poll(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait until `done` (for a topology change to settle): an error from a server in the middle
    of the change counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(redis.RedisError, OSError, ValueError):
            if done():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def script_stats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """Calls and failed calls (a NOSCRIPT refusal is one) of EVALSHA and EVAL, from Redis."""
    stats = client.info("commandstats")
    counts = {}
    for cmd in ("evalsha", "eval"):
        stat = stats.get(f"cmdstat_{cmd}", {})
        counts[cmd] = (stat.get("calls", 0), stat.get("failed_calls", 0))
    return counts


LAG_LIMIT = 0.6
"""Seconds a replica may be paused (`lag_behind`): within the 1 s after which the tests' clusters
and sentinels count a silent server as failed."""


def lag_behind(
    primary: RedisServer, replica: RedisServer, written: Callable[[RedisServer], bool]
) -> None:
    """Leave `replica` without the writes `primary` takes until `written(primary)`, for good:
    the replica is paused (SIGSTOP) and the primary closes its replication link (the replica
    gets what was sent before, nothing after); once written, the primary is paused in its turn
    so the replica cannot catch up, and the replica continues. The caller fails the primary
    over to it and kills the primary (SIGKILL ends a paused process too)."""
    assert primary.proc is not None and replica.proc is not None
    with replica.client() as client:
        [link] = [c for c in client.client_list() if "M" in c["flags"]]  # its link's end
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        with primary.client() as client:
            client.client_kill(link["laddr"])
        poll(lambda: written(primary), "writes while a replica is cut off", LAG_LIMIT)
    finally:
        primary.proc.send_signal(signal.SIGSTOP)
        replica.proc.send_signal(signal.SIGCONT)
