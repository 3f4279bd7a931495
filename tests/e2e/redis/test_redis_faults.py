"""The Redis engine across faults of its own: a node that comes back late to a Redis that lost
the channel, and a subscriber that leaves while its node waits for Redis.

Real pushserver processes and a real redis-server on loopback (see redis_fixture.py); a node's
link to Redis can be cut with a `TcpProxy` between them.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
from collections.abc import Callable

import aiohttp

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...tcpproxy import TcpProxy
from ...wire import Subscriber, publish, streaming, take, wait_for_subscribers
from .test_redis_broker import ids, node_args, wait_until


async def _health(session: aiohttp.ClientSession, node: ServerProcess) -> int:
    async with session.get(f"{node.url}/healthz") as r:
        return r.status


async def test_node_back_late_after_redis_restart_delivers_the_new_epoch_from_its_start(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """Redis restarts empty; another node publishes to the new epoch before this one is back.
    Its subscribers must get the epoch gap and then every message of the new epoch."""
    gate_closed = False
    async with TcpProxy(redis_server.port, cut_after=lambda: 0 if gate_closed else None) as gate:
        a = server_factory(*node_args(redis_server))
        b = server_factory("--redis", f"redis://127.0.0.1:{gate.port}/0", "--heartbeat", "0.5")
        async with aiohttp.ClientSession() as s:

            async def b_up() -> bool:
                return await _health(s, b) == 200

            await wait_until(b_up, "node b up")
            subs = await streaming(s, b.url, "late")
            for n in range(3):
                await publish(s, a.url, "late", f"old {n}")
            # Redis dies only once b has the old epoch: a notification still on its way when Redis
            # is killed is lost with it, as the protocol allows (the old epoch is unknowable).
            for sub in subs:
                assert ids(await take(sub, 3)) == [1, 2, 3], sub.transport
            readers = [asyncio.create_task(take(sub, 6, timeout=60)) for sub in subs]

            gate_closed = True  # b's reconnects are cut until the gate opens
            redis_server.stop(signal.SIGKILL)
            redis_server.restart()

            async def a_up_b_down() -> bool:
                return await _health(s, a) == 200 and await _health(s, b) == 503

            await wait_until(a_up_b_down, "node a back, node b still cut off")
            for n in range(3):
                await publish(s, a.url, "late", f"new {n}")
            gate_closed = False
            await wait_until(b_up, "node b back")
            for n in range(3, 5):
                await publish(s, a.url, "late", f"new {n}")
            for sub, reader in zip(subs, readers, strict=True):
                events = await reader
                gap = events[0]
                assert (gap["type"], gap["reason"], gap["from"], gap["to"]) == (
                    "gap",
                    "epoch",
                    1,
                    0,
                ), sub.transport
                assert ids(events[1:]) == [1, 2, 3, 4, 5], sub.transport
                assert [e["data"] for e in events[1:]] == [f"new {n}" for n in range(5)]
                await sub.close()


def _unread_bytes(port: int) -> int:
    """Bytes waiting, unread, in the receive queues of the server's connections on `port`
    (from /proc/net/tcp): a frozen Redis leaves the commands sent to it there."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, queues = fields[1], fields[4]
            if int(local.split(":")[1], 16) == port:
                total += int(queues.split(":")[1], 16)
    return total


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a client that vanishes does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


async def test_a_subscriber_reset_while_redis_confirms_does_not_poison_the_channels(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    node = server_factory(*node_args(redis_server))
    names = [f"poison{n}" for n in range(8)]
    loop = asyncio.get_running_loop()
    redis_server.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        before = _unread_bytes(redis_server.port)
        sock = socket.create_connection(("127.0.0.1", node.port))
        sock.sendall(f"GET /stream/{','.join(names)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())

        async def subscribe_sent() -> bool:
            return _unread_bytes(redis_server.port) > before

        await wait_until(subscribe_sent, "the node's SUBSCRIBE waiting in the frozen Redis")
        _reset(sock)
        async with aiohttp.ClientSession() as s:
            # The reset is read before this request: the aborted subscribe is cancelled by now.
            assert await _health(s, node) == 200
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as s:
        for name in names:
            for attempt in range(3):
                sub = Subscriber(s, node.url, "stream", name)
                await sub.connect()
                await wait_for_subscribers(s, node.url, name, 1)
                reader = loop.create_task(take(sub, 1))
                await publish(s, node.url, name, attempt)
                assert [e["data"] for e in await reader] == [attempt], name
                await sub.close()
