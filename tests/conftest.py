"""Shared fixtures: real servers on ephemeral loopback ports."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pushserver.launcher import ServerProcess

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

if path := os.environ.get("PYTHONPATH"):
    # The tree under test (a compiled copy: `PYTHONPATH=.` in it) is what every process the
    # tests start imports, whatever its working directory (a client's directory, a tmp_path),
    # rather than the checkout the venv has installed.
    entries = (str(Path(entry).resolve()) for entry in path.split(os.pathsep) if entry)
    os.environ["PYTHONPATH"] = os.pathsep.join(entries)

SLOW = {
    # the measuring tools, run for real: Locust burn-ins, bench experiments, their timeouts
    "e2e/tools/test_burnin.py",
    "e2e/tools/test_burnin_faults.py",
    "e2e/tools/test_bench.py",
    "e2e/tools/test_bench_arrival.py",
    "e2e/tools/test_bench_bare.py",
    "e2e/tools/test_bench_nchan.py",
    "e2e/tools/test_bench_pool.py",
    "e2e/tools/test_bench_timeouts.py",
    "e2e/tools/test_bench_wirebytes.py",
    # every command of the README and the burn-in docs, as a new user runs them
    "e2e/deploy/test_docs_walk.py",
    # chaos, floods and lossy links: long randomised or high-volume runs
    "e2e/redis/test_chaos_redis.py",
    "e2e/security/test_abuse_flood.py",
    "e2e/transports/test_lossy_links.py",
    "e2e/http/test_fuzz_openapi.py",
    # the JS, Java and browser suites (npm, Maven, Chromium) and nginx in front
    "e2e/clients/test_java_client.py",
    "e2e/clients/test_js_client.py",
    "e2e/clients/test_browser_js.py",
    "e2e/transports/test_compression_decoders.py",
    "e2e/transports/test_compression_server.py",
    "e2e/deploy/test_nginx.py",
    "e2e/deploy/test_nginx_nodes.py",
    # real Redis Clusters and Sentinel sets, started and failed over
    "e2e/redis/test_redis_cluster_engine.py",
    "e2e/redis/test_redis_sentinel_engine.py",
    "e2e/redis/test_redis_fixtures.py",
    "e2e/redis/test_redis_library_cluster.py",
    "e2e/redis/test_redis_library_sentinel.py",
}
"""Test files marked `slow`: `-m "not slow"` leaves them out (README, "Tests")."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    if missing := sorted(name for name in SLOW if not (here / name).exists()):
        raise pytest.UsageError(f"tests/conftest.py SLOW names files that are not there: {missing}")
    for item in items:
        if item.path.relative_to(here).as_posix() in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def server_factory() -> Iterator[Callable[..., ServerProcess]]:
    """`server_factory("--heartbeat", "1")` starts a server; all are stopped at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, host: str = "127.0.0.1") -> ServerProcess:
        srv = ServerProcess(args, host=host)
        srv.start(0)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory("--heartbeat", "1")


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ServerProcess]:
    """One server for a module's tests that leave no state the others could see."""
    with ServerProcess(["--heartbeat", "1"]) as srv:
        yield srv
