"""The Redis engine's publishing connection against a real redis-server.

A script is called by its digest and sent whole when Redis lost it; every URL form the broker
accepts (a password, a named user, a database, a Unix socket, TLS) reaches the same server as
redis-py's connection for it; and a call that is lost, unanswered or cancelled leaves the next
call its own reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import BlockingConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pushserver.broker.redis.pipe import Pipe, Script
from pushserver.broker.redis.scripts import meta_key

from ...inprocess import DEADLINE, in_process
from ...redis_fixture import (
    RedisServer,
    free_port,
    redis_server_fixture,  # noqa: F401
    running,
    script_stats,
)

ECHO = Script("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")


@contextlib.asynccontextmanager
async def pipe(url: str, timeout: float = DEADLINE) -> AsyncIterator[Pipe]:
    pool = BlockingConnectionPool.from_url(url, protocol=2)
    opened = Pipe(pool.make_connection(), timeout, connect_timeout=DEADLINE)
    try:
        yield opened
    finally:
        opened.close()


async def test_a_script_goes_by_digest_and_whole_when_redis_lost_it(
    redis_server: RedisServer,
) -> None:
    client = redis_server.client()
    async with pipe(redis_server.url) as calls:
        assert await calls.script(ECHO, ["k"], [b"\x00\xff"]) == [b"k", b"\x00\xff", 1]
        assert await calls.script(ECHO, ["k"], ["again"]) == [b"k", b"again", 2]
        client.script_flush()
        assert await calls.script(ECHO, ["k"], ["lost"]) == [b"k", b"lost", 3]
        assert await calls.script(ECHO, ["k"], ["kept"]) == [b"k", b"kept", 4]
    # Sent whole once at first and once after the flush; every other call by its digest.
    assert script_stats(client) == {"evalsha": (4, 2), "eval": (2, 0)}


async def test_an_error_reply_is_raised_and_the_connection_kept(
    redis_server: RedisServer,
) -> None:
    client = redis_server.client()
    before = client.info("stats")["total_connections_received"]
    async with pipe(redis_server.url) as calls:
        with pytest.raises(ResponseError, match="unknown command"):
            await calls.call("NO-SUCH-COMMAND")
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            await calls.call("GET")
        assert await calls.call("ECHO", "next") == b"next"
    assert client.info("stats")["total_connections_received"] == before + 1


async def test_a_password_and_a_database_from_the_url() -> None:
    with running("--requirepass", "s3cret") as server:
        admin = redis.Redis(host="127.0.0.1", port=server.port, password="s3cret", db=3)
        url = f"redis://:s3cret@127.0.0.1:{server.port}/3"
        async with in_process(redis=url) as (state, _, _port):
            [(message, _)] = await state.hub.publish([("news", b'"x"')])
        assert message.id == 1
        assert admin.hget(meta_key("news"), "i") == b"1"
        async with pipe(f"redis://:wrong@127.0.0.1:{server.port}/0") as calls:
            with pytest.raises(ResponseError, match="WRONGPASS"):
                await calls.call("PING")


async def test_a_named_user() -> None:
    with running("--requirepass", "s3cret") as server:
        admin = redis.Redis(host="127.0.0.1", port=server.port, password="s3cret")
        admin.acl_setuser("alice", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all"])
        async with pipe(f"redis://alice:pw@127.0.0.1:{server.port}/0") as calls:
            assert await calls.call("ACL", "WHOAMI") == b"alice"
        async with pipe(f"redis://alice:nope@127.0.0.1:{server.port}/0") as calls:
            with pytest.raises(ResponseError, match="WRONGPASS"):
                await calls.call("PING")


async def test_a_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "redis.sock"
    with running("--unixsocket", str(path)) as server:
        async with pipe(f"unix://{path}?db=2") as calls:
            assert await calls.script(ECHO, ["k"], ["v"]) == [b"k", b"v", 1]
        assert redis.Redis(port=server.port, db=2).get("k") == b"1"


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, to be its own authority."""
    cert, key = directory / "redis.crt", directory / "redis.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_with_the_certificate_checked(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    port = free_port()
    tls = (
        *("--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)),
        *("--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"),
    )
    with running(*tls) as server:
        async with pipe(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}") as calls:
            assert await calls.script(ECHO, ["k"], ["v"]) == [b"k", b"v", 1]
        assert redis.Redis(port=server.port).get("k") == b"1"
        (tmp_path / "other").mkdir()
        other, _ = certificate(tmp_path / "other")
        async with pipe(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={other}") as calls:
            with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
                await calls.call("PING")


@contextlib.contextmanager
def frozen(server: RedisServer) -> Iterator[None]:
    """Redis stopped (SIGSTOP): connected, reading nothing, answering nothing."""
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.proc.send_signal(signal.SIGCONT)


async def test_a_call_redis_never_answers_times_out_and_its_reply_is_not_the_next_ones(
    redis_server: RedisServer,
) -> None:
    async with pipe(redis_server.url, timeout=0.5) as calls:
        assert await calls.call("ECHO", "warm") == b"warm"
        with frozen(redis_server), pytest.raises(RedisTimeoutError):
            await calls.call("ECHO", "first")
        assert await calls.call("ECHO", "second") == b"second"


async def test_a_cancelled_call_leaves_the_next_call_its_own_reply(
    redis_server: RedisServer,
) -> None:
    async with pipe(redis_server.url) as calls:
        assert await calls.call("ECHO", "warm") == b"warm"
        with frozen(redis_server):
            first = asyncio.create_task(calls.call("ECHO", "first"))
            await asyncio.sleep(0)  # one turn of the loop: the task writes its command
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
        assert await calls.call("ECHO", "second") == b"second"


async def test_redis_gone_fails_the_call_and_back_it_serves_again(
    redis_server: RedisServer,
) -> None:
    async with pipe(redis_server.url) as calls:
        assert await calls.script(ECHO, ["k"], ["v"]) == [b"k", b"v", 1]
        redis_server.stop(signal.SIGKILL)
        with pytest.raises((RedisConnectionError, OSError)):
            await calls.script(ECHO, ["k"], ["v"])
        redis_server.restart()
        # A new Redis, empty: the script is sent whole again.
        assert await calls.script(ECHO, ["k"], ["v"]) == [b"k", b"v", 1]


async def test_closed_while_connecting_it_leaves_no_connection_behind(
    redis_server: RedisServer,
) -> None:
    client = redis_server.client()
    async with pipe(redis_server.url) as calls:
        connecting = asyncio.create_task(calls.call("PING"))
        await asyncio.sleep(0)  # one turn of the loop: the connection is being opened
        calls.close()
        with pytest.raises(RedisConnectionError):
            await connecting
        with pytest.raises(RedisConnectionError):
            await calls.call("PING")
    deadline = time.monotonic() + DEADLINE
    while len(client.client_list()) > 1:  # Redis may take a turn to see the aborted one go
        assert time.monotonic() < deadline, client.client_list()
