"""Shared fixtures: real servers on ephemeral loopback ports."""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterator

import pytest

from pushserver.launcher import ServerProcess

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


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
