"""`pushserver --check`: the settings judged as at start, Redis reached, nothing served."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from pushserver.cli import redis_nodes
from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

from ...redis_fixture import RedisServer, poll, redis_server_fixture, running  # noqa: F401


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PUSHSERVER_")}
    return subprocess.run(
        [sys.executable, "-m", "pushserver", "--check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
        check=False,
    )


def test_good_settings_give_one_summary_line_and_bind_nothing() -> None:
    port = free_port()
    done = check("--port", str(port), "--history-size", "500")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"pushserver: settings OK: would listen on 127.0.0.1:{port}, 1 process, memory broker"
    ]
    assert done.stderr == ""
    with socket.create_server(("127.0.0.1", port)):
        pass  # still free: the check bound nothing


def test_a_reachable_redis_is_pinged(redis_server: RedisServer) -> None:
    done = check("--workers", "2", "--redis", redis_server.url)
    assert done.returncode == 0, done.stderr
    assert f"2 workers, redis at {redis_server.url} (PING answered)" in done.stdout


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--redis", f"redis://127.0.0.1:{free_port()}/0"], {}, ["cannot reach Redis"]),
        (["--redis", "notaurl"], {}, ["--redis must be a redis://"]),
        (["--bogus"], {}, ["unrecognized arguments: --bogus"]),
        (["--port", "99999"], {}, ["--port must be 0..65535"]),
        ([], {"PUSHSERVER_HEARTBEAT": "often"}, ["PUSHSERVER_HEARTBEAT must be a number"]),
        (["--workers", "2"], {}, ["--workers > 1 needs --redis"]),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], words: list[str]
) -> None:
    done = check(*args, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("pushserver: error: ")
    for word in words:
        assert word in line


def test_cluster_and_sentinel_urls_are_checked_at_each_seed() -> None:
    assert redis_nodes("redis://h:1/0") == ["redis://h:1/0"]
    assert redis_nodes("redis+cluster://a:1,b:2") == ["redis://a:1", "redis://b:2"]
    assert redis_nodes("rediss+cluster://u:p%40@a:1") == ["rediss://u:p%40@a:1"]
    # the password is the master's: sentinels are asked without it
    assert redis_nodes("redis+sentinel://u:p@a:1,b:2/mymaster/0") == ["redis://a:1", "redis://b:2"]


def test_a_redis_password_is_never_printed() -> None:
    with running("--requirepass", "s3cret") as redis_server:
        url = f"redis://:s3cret@127.0.0.1:{redis_server.port}/0"
        done = check("--redis", url)
        assert done.returncode == 0, done.stderr
        assert f"redis at redis://:***@127.0.0.1:{redis_server.port}/0 (PING" in done.stdout
    for url in (
        f"redis://:s3cret@127.0.0.1:{free_port()}/0",
        f"redis+cluster://u:s3cret@127.0.0.1:{free_port()}",
    ):
        done = check("--redis", url)
        assert done.returncode == 2
        assert "cannot reach Redis" in done.stderr and "***" in done.stderr
        assert "s3cret" not in done.stdout + done.stderr


def test_a_node_that_cannot_reach_redis_logs_its_url_without_the_password(
    server_factory: Callable[..., ServerProcess],
) -> None:
    node = server_factory("--redis", f"redis://:s3cret@127.0.0.1:{free_port()}/0")
    poll(lambda: "unreachable" in node.log, "the node's warning")
    assert "redis://:***@127.0.0.1" in node.log
    assert "s3cret" not in node.log
