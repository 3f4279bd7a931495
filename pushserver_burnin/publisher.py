"""The publisher: timestamped messages at a fixed rate to every channel under test.

It runs on the Locust master (or alone with the probe), never among busy subscribers: a
publisher that falls behind lowers the load and makes latency look better than it is, so the
rate it actually kept is measured and reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent
import orjson
from gevent.pool import Pool

from pushserver_burnin.histogram import Histogram
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
    round_trip: Histogram = field(default_factory=Histogram)

    @property
    def kept_rate(self) -> float:
        """Fraction of the asked rate actually kept (1.0 = on schedule)."""
        return self.ticks / self.due if self.due else 1.0


PublishHook = Callable[[float, int, BaseException | None], None]


class Publisher:
    def __init__(
        self, endpoint: Endpoint, publish_key: str = "", on_request: PublishHook | None = None
    ) -> None:
        self.headers = {"Content-Type": "application/json"}
        if publish_key:
            self.headers["Authorization"] = f"Bearer {publish_key}"
        self.on_request = on_request
        self.conns = [Connection(endpoint) for _ in range(CONNECTIONS)]
        self.pool = Pool(CONNECTIONS)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()

    def publish_step(
        self, step: int, channels: list[str], uncounted: int, rate: float, seconds: float
    ) -> PublishResult:
        """Publish step `step` for `seconds`; the last `uncounted` channels (the probe's) do
        not count in `messages`."""
        result = PublishResult(due=max(1, math.floor(rate * seconds + 1e-9)))
        counted = len(channels) - uncounted
        start = time.monotonic()
        for seq in range(result.due):
            delay = start + seq / rate - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            if time.monotonic() - start >= seconds + 1 / rate:
                break  # so far behind that the step is over: what was not sent is not due
            accepted = self._tick(step, seq, channels, counted, result)
            result.messages += accepted
            result.ticks += 1
        return result

    def _tick(
        self, step: int, seq: int, channels: list[str], counted: int, result: PublishResult
    ) -> int:
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
            sent_at = time.time()
            data = {"t": sent_at, "step": step, "seq": seq}
            items = data if batch is None else [{"channel": c, "data": data} for c in batch]
            body = orjson.dumps(items)
            begun = time.perf_counter()
            error: BaseException | None = None
            try:
                head, answer = conn.request("POST", path, body, self.headers)
                if head.status != 201:
                    raise ConnectionClosed(f"publish answered {head.status}: {answer[:200]!r}")
            except (OSError, ConnectionClosed) as exc:
                error = exc
                conn.close()
            elapsed = time.perf_counter() - begun
            if self.on_request is not None:
                self.on_request(elapsed, len(body), error)
            if error is not None:
                result.errors += 1
                result.first_error = result.first_error or f"{path}: {error!r}"
                return 0
            result.round_trip.add(elapsed)
            size = 1 if batch is None else len(batch)
            return max(0, min(at + size, counted) - at)

        if len(jobs) == 1:
            return send(jobs[0], self.conns[0])
        accepted = 0
        for first in range(0, len(jobs), CONNECTIONS):
            group = jobs[first : first + CONNECTIONS]
            accepted += sum(
                self.pool.map(lambda pair: send(*pair), zip(group, self.conns, strict=False))
            )
        return accepted
