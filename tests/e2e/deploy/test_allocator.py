"""The allocator a server runs on, started as an operator starts it: on jemalloc with the Redis
broker when it is installed (`pushserver.reexec`), Python's own with the memory broker, what
the operator chose otherwise, said in `/stats`; and on
Redis the memory a flood of fresh channels took comes back within issue 36's bound
(1.25 x the baseline + 20 MB), judged once the server holds no channel."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pushserver.launcher import ServerProcess
from pushserver.monitor.allocator import jemalloc_library
from pushserver.reexec import OPERATORS
from pushserver_bench import channels
from pushserver_measure.http11 import Endpoint
from tests.redis_fixture import RedisServer, redis_server_fixture

__all__ = ["redis_server_fixture"]

LIBRARY = jemalloc_library()
needs_jemalloc = pytest.mark.skipif(not LIBRARY, reason="jemalloc is not installed")


@pytest.fixture(autouse=True)
def as_started_by_an_operator() -> None:
    chosen = [name for name in OPERATORS if os.environ.get(name)]
    if chosen:
        pytest.skip(f"the tests' own environment sets {chosen}")


def stats(srv: ServerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(srv.url + "/stats", timeout=10) as answer:
        got = json.load(answer)
    assert isinstance(got, dict)
    return got


@pytest.fixture
def started() -> Iterator[list[ServerProcess]]:
    servers: list[ServerProcess] = []
    yield servers
    for srv in servers:
        srv.stop()


def start(servers: list[ServerProcess], srv: ServerProcess) -> ServerProcess:
    servers.append(srv)
    return srv.start(0)


class Command(ServerProcess):
    """The `pushserver` script pip installs, rather than `python -m pushserver`."""

    def command(self, port: int) -> list[str]:
        script = Path(sys.executable).with_name("pushserver")
        return [str(script), "--host", self.host, "--port", str(port), *self.args]


@needs_jemalloc
@pytest.mark.parametrize("kind", [ServerProcess, Command])
def test_a_server_started_plainly_on_redis_runs_on_jemalloc_in_the_same_process(
    started: list[ServerProcess], kind: type[ServerProcess], redis_server: RedisServer
) -> None:
    srv = start(started, kind(["--redis", redis_server.url]))
    got = stats(srv)
    assert got["allocator"]["python"] == "malloc"
    assert got["allocator"]["c"].startswith("jemalloc ")
    assert srv.proc is not None and got["pid"] == srv.proc.pid  # replaced, not a child
    assert any("allocator malloc + jemalloc " in line for line in srv.output)
    assert not any("not installed" in line for line in srv.output)


@needs_jemalloc
def test_the_memory_broker_runs_on_python_s_own_unless_jemalloc_is_asked_for(
    started: list[ServerProcess],
) -> None:
    got = stats(start(started, ServerProcess()))
    assert got["allocator"]["python"] == "pymalloc"
    assert not got["allocator"]["c"].startswith("jemalloc")
    got = stats(start(started, ServerProcess(["--allocator", "jemalloc"])))
    assert got["allocator"]["python"] == "malloc"
    assert got["allocator"]["c"].startswith("jemalloc ")


@pytest.mark.parametrize(
    ("args", "env", "python"),
    [
        (["--allocator", "pymalloc"], {}, "pymalloc"),
        ([], {"PUSHSERVER_ALLOCATOR": "pymalloc"}, "pymalloc"),
        ([], {"PYTHONMALLOC": "pymalloc"}, "pymalloc"),
        ([], {"PYTHONMALLOC": "malloc"}, "malloc"),
    ],
)
def test_the_operator_keeps_python_or_glibc_by_a_setting_or_their_own_variables(
    started: list[ServerProcess],
    redis_server: RedisServer,
    args: list[str],
    env: dict[str, str],
    python: str,
) -> None:
    got = stats(start(started, ServerProcess([*args, "--redis", redis_server.url], env=env)))
    assert got["allocator"]["python"] == python
    assert not got["allocator"]["c"].startswith("jemalloc")


@needs_jemalloc
def test_a_preload_the_operator_set_is_kept_as_it_is(
    started: list[ServerProcess], redis_server: RedisServer
) -> None:
    srv = ServerProcess(["--redis", redis_server.url], env={"LD_PRELOAD": LIBRARY})
    got = stats(start(started, srv))
    assert got["allocator"]["python"] == "pymalloc"  # not made malloc behind their back
    assert got["allocator"]["c"].startswith("jemalloc ")


COUNTED = textwrap.dedent(
    """
    import ctypes.util, os

    looked_up = ctypes.util.find_library

    def find_library(name):
        with open(os.environ["LOOKUPS"], "a") as out:
            out.write(name + "\\n")
        return None if os.environ.get("NO_JEMALLOC") else looked_up(name)

    ctypes.util.find_library = find_library
    """
)
"""A `sitecustomize` for the server's interpreters, before and after the `execve`: each
library lookup written to the file `LOOKUPS` names; `NO_JEMALLOC` stands for a machine
without it."""


def counted(tmp_path: Path, **env: str) -> tuple[dict[str, str], Path]:
    """The environment that has a server count its lookups, and the file they go to."""
    (tmp_path / "sitecustomize.py").write_text(COUNTED)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    lookups = tmp_path / "lookups"
    return {"PYTHONPATH": path, "LOOKUPS": str(lookups), **env}, lookups


@needs_jemalloc
@pytest.mark.parametrize("kind", [ServerProcess, Command])
def test_a_start_on_redis_looks_for_jemalloc_once(
    started: list[ServerProcess],
    kind: type[ServerProcess],
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    """The command looks and replaces itself; the replaced one finds `LD_PRELOAD` set and
    runs on jemalloc: it does not look again, neither to choose nor to warn."""
    env, lookups = counted(tmp_path)
    srv = start(started, kind(["--redis", redis_server.url], env=env))
    got = stats(srv)
    assert got["allocator"]["c"].startswith("jemalloc ")
    assert srv.proc is not None and got["pid"] == srv.proc.pid  # replaced, not a child
    assert lookups.read_text().split() == ["jemalloc"]


def test_without_jemalloc_a_start_on_redis_looks_once_and_warns(
    started: list[ServerProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    env, lookups = counted(tmp_path, NO_JEMALLOC="1")
    srv = start(started, ServerProcess(["--redis", redis_server.url], env=env))
    got = stats(srv)
    assert got["allocator"]["python"] == "pymalloc"
    assert not got["allocator"]["c"].startswith("jemalloc")
    assert any("jemalloc is not installed" in line for line in srv.output)
    assert lookups.read_text().split() == ["jemalloc"]


FLOOD = 64_000
"""Fresh channels in the flood: under Python's own allocator this many leave more arenas
resident on Redis than the bound allows (docs/performance.md)."""


@needs_jemalloc
def test_a_flood_of_fresh_channels_on_redis_gives_its_memory_back(
    started: list[ServerProcess], redis_server: RedisServer
) -> None:
    srv = start(
        started,
        ServerProcess(
            ["--redis", redis_server.url, "--sweep-interval", "1", "--max-channels", "1000000"],
            ready_timeout=60,
        ),
    )
    assert srv.proc is not None
    pid, endpoint = srv.proc.pid, Endpoint.parse(srv.url)
    assert stats(srv)["allocator"]["c"].startswith("jemalloc ")
    base = channels.rss(pid)
    bound = 1.25 * base + (20 << 20)
    args = channels.parse_args(["flood", "--channels", str(FLOOD), "--hold", "1", "--url", srv.url])
    channels.flood(endpoint, args, lambda: None)
    ended = channels.rss(pid)
    assert ended > bound  # the flood took more than the bound allows
    deadline = time.monotonic() + 120
    while True:
        held, now = channels.stats(endpoint)["channels"], channels.rss(pid)
        if held == 0 and now <= bound:
            break
        assert time.monotonic() < deadline, (
            f"{held} channels held, RSS {now >> 20} MB against a bound of {bound / 2**20:.1f} MB "
            f"(baseline {base >> 20} MB, {ended >> 20} MB as the flood ended)"
        )
        time.sleep(0.5)
