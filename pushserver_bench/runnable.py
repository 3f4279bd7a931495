"""Whether a client process kept up with a burst of answers, from its own run-queue counts.

A subscriber process that times its reads when it makes them (the plain client) adds its own
delay to every latency once the server writes faster than it reads. It then has work waiting
the whole time it reads a message's answers: it runs or waits for a core. Linux counts both in
the main thread's /proc/self/schedstat (nanoseconds run, nanoseconds waited), so sampled as the
process reads, the share of a message's read window it was runnable says whether the server's
writes or the client's reading set the pace. The average over a whole step hides that: a
process idle between messages and saturated during each fan-out averages well under a core.
"""

from __future__ import annotations

import bisect
import os
import time
from array import array
from collections.abc import Mapping, Sequence

SAMPLE_EVERY = 64
"""Deliveries between two samples (a sample is one read of a small /proc file)."""
MIN_WINDOW = 0.02
"""Seconds: a read window shorter than this is not judged (too few samples to say)."""


def share(
    times: Sequence[float], runnable: Sequence[float], start: float, end: float
) -> float | None:
    """The share of [`start`, `end`] the process was runnable, from the samples inside it
    (`times`, ascending, and the runnable seconds at each); None when they span less than
    `MIN_WINDOW`."""
    i = bisect.bisect_left(times, start)
    j = bisect.bisect_right(times, end) - 1
    if j <= i or times[j] - times[i] < MIN_WINDOW:
        return None
    return (runnable[j] - runnable[i]) / (times[j] - times[i])


def busiest_window(
    times: Sequence[float], runnable: Sequence[float], spans: Mapping[float, Sequence[float]]
) -> tuple[float, float]:
    """The largest runnable share over the read windows `spans` (a message's send time → its
    first and last read here) and the send time of that message; (0, 0) when none is judged."""
    best, which = 0.0, 0.0
    for sent, (first, last) in spans.items():
        value = share(times, runnable, first, last)
        if value is not None and value > best:
            best, which = value, sent
    return best, which


class Runnable:
    """Samples of this process's runnable seconds (run + run-queue wait of its main thread)."""

    __slots__ = ("countdown", "fd", "runnable", "times")

    def __init__(self) -> None:
        self.fd = os.open("/proc/self/schedstat", os.O_RDONLY)
        self.times = array("d")
        self.runnable = array("d")
        self.countdown = SAMPLE_EVERY

    def counted(self, n: int) -> None:
        """`n` more deliveries read: a sample once `SAMPLE_EVERY` have been since the last."""
        self.countdown -= n
        if self.countdown <= 0:
            self.countdown = SAMPLE_EVERY
            self.sample()

    def sample(self) -> None:
        run, wait = os.pread(self.fd, 128, 0).split()[:2]
        self.times.append(time.time())
        self.runnable.append((int(run) + int(wait)) / 1e9)

    def busiest(self, spans: Mapping[float, Sequence[float]]) -> tuple[float, float]:
        """`busiest_window` over this process's samples."""
        self.sample()
        return busiest_window(self.times, self.runnable, spans)

    def close(self) -> None:
        os.close(self.fd)
