"""The publisher: timestamped messages at a fixed rate to every channel under test.

It runs on the Locust master (or alone with the probe), never among busy subscribers: a
publisher that falls behind lowers the load and makes latency look better than it is, so the
rate it actually kept is measured and reported.

Coordinated omission is corrected the wrk2 way: each message carries its planned time (when the
fixed rate says it is due), not the time a late publisher got round to sending it, so every
latency measured from it (the publish round trip, end-to-end at every subscriber) includes the
publisher's own delay. How late the publisher was is recorded apart (`late`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import gevent
import orjson

from pushserver_burnin.histogram import Latencies
from pushserver_measure.http11 import Connection, ConnectionClosed, Endpoint

BATCH_LIMIT = 1000  # items per POST /pub, the protocol's maximum
CONNECTIONS = 4  # concurrent batch requests when a tick needs several


@dataclass
class PublishResult:
    ticks: int = 0  # rounds sent (one message to every channel each)
    due: int = 0  # rounds the rate asked for
    messages: int = 0  # messages the server accepted, crowd channels only
    errors: int = 0
    first_error: str = ""  # what the first failed request said, for the step's `invalid`
    began: float = 0.0  # epoch s: message seq is planned at began + seq / rate
    failed: set[int] = field(default_factory=set)  # seqs of which a publish request failed
    round_trip: Latencies = field(default_factory=Latencies)  # from the planned time
    late: Latencies = field(default_factory=Latencies)  # request sent - planned time

    @property
    def kept_rate(self) -> float:
        """Fraction of the asked rate actually kept (1.0 = on schedule)."""
        return self.ticks / self.due if self.due else 1.0


PublishHook = Callable[[float, int, BaseException | None], None]


@dataclass(frozen=True)
class Tick:
    """One round: message `seq` of `step`, due at `planned` (monotonic) = `planned_epoch`."""

    step: int
    seq: int
    planned: float
    planned_epoch: float


class Publisher:
    def __init__(
        self, endpoint: Endpoint, publish_key: str = "", on_request: PublishHook | None = None
    ) -> None:
        self.headers = {"Content-Type": "application/json"}
        if publish_key:
            self.headers["Authorization"] = f"Bearer {publish_key}"
        self.on_request = on_request
        self.conns = [Connection(endpoint) for _ in range(CONNECTIONS)]

    def close(self) -> None:
        for conn in self.conns:
            conn.close()

    def publish_step(
        self, step: int, channels: list[str], uncounted: int, rate: float, seconds: float
    ) -> PublishResult:
        """Publish step `step` for `seconds`; the last `uncounted` channels (the probe's) do
        not count in `messages`."""
        result = PublishResult(due=max(1, math.floor(rate * seconds + 1e-9)), began=time.time())
        counted = len(channels) - uncounted
        start = time.monotonic()
        for seq in range(result.due):
            planned = start + seq / rate
            delay = planned - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            if time.monotonic() - start >= seconds + 1 / rate:
                break  # so far behind that the step is over: what was not sent is not due
            tick = Tick(step, seq, planned, result.began + seq / rate)
            accepted = self._tick(tick, channels, counted, result)
            result.messages += accepted
            result.ticks += 1
        return result

    def _tick(self, tick: Tick, channels: list[str], counted: int, result: PublishResult) -> int:
        """One round to every channel; returns how many counted messages the server accepted."""
        jobs: list[tuple[int, str, list[str] | None]]
        if len(channels) == 1:
            jobs = [(0, f"/pub/{channels[0]}", None)]
        else:
            jobs = [
                (at, "/pub", channels[at : at + BATCH_LIMIT])
                for at in range(0, len(channels), BATCH_LIMIT)
            ]

        def send(job: tuple[int, str, list[str] | None], conn: Connection) -> int:
            at, path, batch = job
            data = {"t": tick.planned_epoch, "step": tick.step, "seq": tick.seq}
            items = data if batch is None else [{"channel": c, "data": data} for c in batch]
            body = orjson.dumps(items)
            begun = time.monotonic()
            result.late.add(max(0.0, begun - tick.planned))
            error: BaseException | None = None
            try:
                head, answer = conn.request("POST", path, body, self.headers)
                if head.status != 201:
                    raise ConnectionClosed(f"publish answered {head.status}: {answer[:200]!r}")
            except (OSError, ConnectionClosed) as exc:
                error = exc
                conn.close()
            now = time.monotonic()
            if self.on_request is not None:
                self.on_request(now - begun, len(body), error)
            if error is not None:
                result.errors += 1
                result.failed.add(tick.seq)
                result.first_error = result.first_error or f"{path}: {error!r}"
                return 0
            result.round_trip.add(now - tick.planned)
            size = 1 if batch is None else len(batch)
            return max(0, min(at + size, counted) - at)

        if len(jobs) == 1:
            return send(jobs[0], self.conns[0])
        return in_turn(jobs, self.conns, send)


Job = TypeVar("Job")


def in_turn(
    jobs: list[Job], conns: list[Connection], send: Callable[[Job, Connection], int]
) -> int:
    """Send every job, one greenlet per connection, each taking the next job as soon as its last
    is answered; returns the sum of what `send` returned.

    Sent in groups of len(conns), each group after the slowest request of the one before, every
    batch of a round also waited for the slowest of each group ahead of it, and that wait
    counted in its latency as if it were the server's."""
    pending = iter(jobs)  # shared: the greenlets take turns at it, never the same job twice

    def work(conn: Connection) -> int:
        return sum(send(job, conn) for job in pending)

    greenlets = [gevent.spawn(work, conn) for conn in conns[: len(jobs)]]
    gevent.joinall(greenlets, raise_error=True)
    return sum(greenlet.value for greenlet in greenlets)
