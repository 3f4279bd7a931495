"""Graceful shutdown with publishes in flight: each is answered with what happened to it.

Publishers keep one publish in flight each, on their own kept-alive connection. With Redis, its
write commands are paused (`CLIENT PAUSE`, on Redis's own timer) and SIGTERM is sent once every
server process has a publish script call held there: those publishes are with the broker, their
outcome unknown to the server, when it starts draining. Redis stays healthy, so each must be
answered `201` once Redis runs it, never `504 outcome_unknown`, and every answer is checked
against the channel's history in Redis.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import pytest
import redis.asyncio

from pushserver.broker.memory import MemoryBroker
from pushserver.core.broker import Item
from pushserver.core.hub import Hub
from pushserver.core.messages import Message
from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401

PUBLISHERS = 48
CHANNELS = 4
SHUTDOWN_TIMEOUT = 20.0
PAUSE_MS = 1500
"""How long Redis holds the publishes: far longer than a drain takes to reach the broker's
close, and well under the 5 s a publish waits for Redis before it is answered 504."""
SCRIPT_CALLS = ("evalsha", "eval")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One publish: what it sent, and its answer (`status` None: the connection closed first)."""

    channel: str
    data: int
    status: int | None
    answer: dict[str, object]
    answered_after_signal: bool


class Shutdown:
    """Drives the publishers; signals the server once each was answered once and `hold` is
    done."""

    def __init__(
        self, srv: ServerProcess, processes: int, hold: Callable[[], Awaitable[None]] | None
    ) -> None:
        self.srv = srv
        self.processes = processes
        self.hold = hold
        self.outcomes: list[Outcome] = []
        self.answered: set[int] = set()
        self.all_answered = asyncio.Event()
        self.signalled = False
        self.numbers = iter(range(1, 1 << 30))

    async def run(self) -> None:
        """Publish until the server closes every connection and exits; its drain must end by
        itself, not by `--shutdown-timeout`."""
        publishers = [asyncio.create_task(self.publisher(n)) for n in range(PUBLISHERS)]
        await self.all_answered.wait()
        if self.hold is not None:
            await self.hold()
        assert self.srv.proc is not None
        self.srv.proc.send_signal(signal.SIGTERM)
        self.signalled = True
        await asyncio.gather(*publishers)
        code = await asyncio.to_thread(self.srv.proc.wait, SHUTDOWN_TIMEOUT + 10)
        assert code == 0, self.srv.log
        deadline = time.monotonic() + 10  # the log is read by a thread: wait for its end
        while self.srv.log.count(" stopped") < self.processes:
            assert time.monotonic() < deadline, self.srv.log
            await asyncio.sleep(0.05)
        assert "shutdown timeout" not in self.srv.log, self.srv.log

    async def publisher(self, index: int) -> None:
        channel = f"inflight{index % CHANNELS}"
        reader, writer = await asyncio.open_connection("127.0.0.1", self.srv.port)
        try:
            while True:
                data = next(self.numbers)
                body = str(data).encode()
                writer.write(
                    b"POST /pub/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (channel.encode(), len(body), body)
                )
                status, answer = await _response(reader)
                self.outcomes.append(Outcome(channel, data, status, answer, self.signalled))
                if status != 201:
                    return
                self.answered.add(index)
                if len(self.answered) == PUBLISHERS:
                    self.all_answered.set()
        finally:
            writer.close()


async def _response(reader: asyncio.StreamReader) -> tuple[int | None, dict[str, object]]:
    """The status and JSON body of one answer; None when the connection closed instead."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None, {}
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
    body = await reader.readexactly(int(headers["content-length"]))
    return int(lines[0].split()[1]), json.loads(body)


def _holding(redis_server: RedisServer, processes: int) -> Callable[[], Awaitable[None]]:
    """Pauses Redis's write commands for `PAUSE_MS` and returns once it holds a publish script
    call of each of the server's `processes`."""

    async def hold() -> None:
        await _pause(redis_server)
        await _until_held(redis_server, processes)

    return hold


async def _pause(redis_server: RedisServer) -> None:
    """Redis holds every script call (they count as writes) for `PAUSE_MS`, on its own timer."""
    async with redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port) as client:
        await client.client_pause(PAUSE_MS, all=False)


async def _until_held(redis_server: RedisServer, calls: int) -> None:
    """Returns once Redis holds `calls` script calls (within the pause)."""
    async with redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port) as client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PAUSE_MS / 1000
        held = 0
        while held < calls:
            assert loop.time() < deadline, f"Redis held {held} script calls"
            clients = await client.client_list()
            held = sum("b" in c["flags"] and c["cmd"] in SCRIPT_CALLS for c in clients)


def _redis_history(redis_server: RedisServer) -> dict[tuple[str, int], int]:
    """Every message Redis holds for the test's channels: (channel, id) -> data."""
    client = redis_server.client()
    held = {}
    for n in range(CHANNELS):
        channel = f"inflight{n}"
        for entry_id, fields in client.xrange(f"pushserver:h:{channel}"):
            held[channel, int(entry_id.split(b"-")[0])] = json.loads(fields[b"d"])
    return held


def _check(outcomes: list[Outcome], history: dict[tuple[str, int], int] | None) -> None:
    """No publish is answered 504; with `history`, every 201 is there under its id and no 503
    is there at all."""
    unexpected = [o for o in outcomes if o.status not in (201, 503, None)]
    assert not unexpected, unexpected
    created = [o for o in outcomes if o.status == 201]
    assert len(created) >= PUBLISHERS, "each publisher is answered once before the signal"
    assert len({(o.channel, o.answer["id"]) for o in created}) == len(created), "an id twice"
    refused = [o for o in outcomes if o.status == 503]
    assert all(o.answer["error"] == "draining" for o in refused), refused
    if history is None:
        return
    for o in created:
        assert history.get((o.channel, o.answer["id"])) == o.data, o
    published = set(history.values())
    assert not [o for o in refused if o.data in published]


PROCESSES = {"workers": 2, "one-process": 1}


@pytest.mark.parametrize("mode", sorted(PROCESSES))
async def test_redis_publishes_in_flight_at_sigterm_get_their_answer(
    mode: str, redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    processes = PROCESSES[mode]
    workers = ("--workers", str(processes)) if processes > 1 else ()
    srv = server_factory(
        *workers,
        *("--redis", redis_server.url, "--history-size", "1000000"),
        *("--shutdown-timeout", str(SHUTDOWN_TIMEOUT)),
    )
    shutdown = Shutdown(srv, processes, _holding(redis_server, processes))
    await shutdown.run()
    _check(shutdown.outcomes, _redis_history(redis_server))
    held = [o for o in shutdown.outcomes if o.status == 201 and o.answered_after_signal]
    assert len(held) >= processes, "the publishes Redis held are answered after the signal"


async def test_memory_publishes_at_sigterm_get_their_answer(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = server_factory("--shutdown-timeout", str(SHUTDOWN_TIMEOUT))
    shutdown = Shutdown(srv, 1, None)
    await shutdown.run()
    _check(shutdown.outcomes, None)


class HeldBroker(MemoryBroker):
    """Holds every publish until `answer` is set, as Redis running a script call does."""

    def __init__(self, expected: int) -> None:
        super().__init__(10, 300, 3600)
        self.expected = expected
        self.held = 0
        self.all_held = asyncio.Event()
        self.answer = asyncio.Event()

    def publish(self, items: Sequence[Item]) -> Coroutine[Any, Any, list[Message]]:
        return self._held(items)

    async def _held(self, items: Sequence[Item]) -> list[Message]:
        self.held += 1
        if self.held == self.expected:
            self.all_held.set()
        await self.answer.wait()
        return super().publish(items)


async def test_hub_answered_returns_once_the_broker_answered_every_publish() -> None:
    broker = HeldBroker(expected=3)
    hub = Hub(broker, max_buffer_bytes=1000)
    async with broker.running(hub):
        await hub.shutdown.answered()  # nothing in flight: no wait
        publishes = [asyncio.create_task(hub.publish([("held", b"1")])) for _ in range(3)]
        await broker.all_held.wait()
        waiting = asyncio.create_task(hub.shutdown.answered())
        broker.answer.set()
        await waiting
        assert all(publish.done() for publish in publishes)
        assert [p.result()[0][0].id for p in publishes] == [1, 2, 3]
        assert hub.shutdown.awaiting == 0


async def test_subscribes_waiting_on_redis_at_sigterm_are_answered(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """A long-poll and a stream whose channels Redis is still opening when the drain runs are
    answered `503 draining` once it has, rather than held after the drain with nothing left to
    answer them (the process then waited out `--shutdown-timeout`)."""
    srv = server_factory("--redis", redis_server.url, "--shutdown-timeout", str(SHUTDOWN_TIMEOUT))
    await _pause(redis_server)
    requests = [b"GET /lp/opening-lp?timeout=60", b"GET /sse/opening-sse"]
    connections = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in requests]
    for (_, writer), line in zip(connections, requests, strict=True):
        writer.write(line + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    await _until_held(redis_server, len(requests))
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGTERM)
    for reader, writer in connections:
        answer = await asyncio.wait_for(reader.read(), SHUTDOWN_TIMEOUT)
        assert answer.startswith(b"HTTP/1.1 503 "), (answer, srv.log)
        assert b"Connection: close" in answer and b'"draining"' in answer, answer
        writer.close()
    assert await asyncio.to_thread(srv.proc.wait, SHUTDOWN_TIMEOUT + 10) == 0
    assert "shutdown timeout" not in srv.log, srv.log
