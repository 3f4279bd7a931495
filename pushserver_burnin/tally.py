"""Per-step delivery counts: kept by each load-generator process, merged on the master.

Every message carries the step it was published in, so a delivery is counted against that step
whenever and wherever it arrives, and a step is judged only after its drain, never by
snapshot time.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pushserver_burnin.histogram import Latencies
from pushserver_measure.machine import cpu_seconds, run_queue_wait


@dataclass
class StepCounts:
    """What one step's deliveries looked like (on one process, or merged)."""

    delivered: int = 0
    duplicates: int = 0
    missed: int = 0  # ids the server announced as lost in gap events
    reconnects: int = 0
    churned: int = 0  # connections dropped on purpose by --churn (also in reconnects)
    fanout: Latencies = field(default_factory=Latencies)
    e2e: Latencies = field(default_factory=Latencies)
    arrivals: list[float] = field(default_factory=list)
    """When each pending e2e sample arrived (epoch s), to sort it into its 1-s window."""
    windows: dict[int, Latencies] = field(default_factory=dict)
    """End-to-end latency by the second (epoch) its delivery arrived in."""

    def window(self, second: int) -> Latencies:
        latencies = self.windows.get(second)
        if latencies is None:
            latencies = self.windows[second] = Latencies()
        return latencies

    def sort_windows(self) -> None:
        """Move each pending e2e sample to the window of the second it arrived in (counted
        there only: the step's e2e is the sum of its windows, `all_e2e`)."""
        if not self.arrivals:
            return
        seconds = np.floor(np.asarray(self.arrivals)).astype(np.int64)
        samples = np.asarray(self.e2e.pending)
        for second in np.unique(seconds):
            self.window(int(second)).pending.extend(samples[seconds == second].tolist())
        self.arrivals = []
        self.e2e.pending = []

    def all_e2e(self) -> Latencies:
        """The step's end-to-end latencies: those not timed by arrival (the probe's) and every
        window's."""
        self.sort_windows()
        total = Latencies()
        total.merge(self.e2e)
        for latencies in self.windows.values():
            total.merge(latencies)
        return total

    def merge(self, other: StepCounts) -> None:
        self.delivered += other.delivered
        self.duplicates += other.duplicates
        self.missed += other.missed
        self.reconnects += other.reconnects
        self.churned += other.churned
        self.fanout.merge(other.fanout)
        self.sort_windows()
        other.sort_windows()
        self.e2e.merge(other.e2e)
        for second, latencies in other.windows.items():
            self.window(second).merge(latencies)

    def to_wire(self) -> list[Any]:
        self.sort_windows()
        return [
            self.delivered,
            self.duplicates,
            self.missed,
            self.reconnects,
            self.churned,
            self.fanout.to_wire(),
            self.e2e.to_wire(),
            [[second, latencies.to_wire()] for second, latencies in self.windows.items()],
        ]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> StepCounts:
        delivered, duplicates, missed, reconnects, churned, fanout, e2e, windows = wire
        return cls(
            delivered,
            duplicates,
            missed,
            reconnects,
            churned,
            Latencies.from_wire(fanout),
            Latencies.from_wire(e2e),
            windows={int(second): Latencies.from_wire(w) for second, w in windows},
        )

    def timeline(self) -> list[list[float | int | None]]:
        """Per second of arrival: [epoch second, count, p50, p90, p99, p999, worst] (seconds)."""
        self.sort_windows()
        rows: list[list[float | int | None]] = []
        for second in sorted(self.windows):
            shape = self.windows[second].summary(with_histogram=False)
            stats = [shape[name] for name in ("count", "p50", "p90", "p99", "p999", "worst")]
            rows.append([second, *stats])
        return rows


class Churned(Exception):
    """A connection dropped on purpose (--churn), to be resumed from its cursor."""


MessageHook = Callable[[float, int], None]  # (worst latency in s, deliveries it stands for)
ReconnectHook = Callable[[BaseException], None]


class Tally:
    """The subscriber-side sink of one process: counts deliveries until the next report.

    Locust hears of each message once per report instead of once per delivery (its statistics
    cost more than everything else a delivery does): `on_message` gets the message's worst
    latency in this process and how many deliveries that stands for. The exact figures travel
    to the master in the mergeable histograms of `take()`.
    """

    def __init__(
        self, on_message: MessageHook | None = None, on_reconnect: ReconnectHook | None = None
    ) -> None:
        self.on_message = on_message
        self.on_reconnect = on_reconnect
        self.established = 0
        self.last_step = 0
        self._steps: dict[int, StepCounts] = {}
        self._new_channels: list[str] = []
        self._messages: dict[tuple[int, Any], list[float]] = {}
        """(step, seq): [deliveries, worst e2e, first arrival] since the last report."""
        self._pid = os.getpid()

    def _counts(self, step: int) -> StepCounts:
        counts = self._steps.get(step)
        if counts is None:
            counts = self._steps[step] = StepCounts()
        return counts

    # Sink interface, called by the subscribers

    def subscribed(self, channel: str) -> None:
        self.established += 1
        self._new_channels.append(channel)

    def delivered(self, envelope: dict[str, Any], received: float, size: int, dup: bool) -> None:
        data = envelope.get("data")
        if type(data) is not dict or "step" not in data:
            return  # not a burn-in message
        step = data["step"]
        counts = self._counts(step)
        if dup:
            counts.duplicates += 1
            return
        counts.delivered += 1
        e2e = received - data["t"]  # from the publish's planned time: see publisher.py
        counts.e2e.pending.append(e2e)
        counts.arrivals.append(received)
        counts.fanout.pending.append(received - envelope["ts"])
        if step > self.last_step:
            self.last_step = step
        message = self._messages.get((step, data.get("seq")))
        if message is None:
            self._messages[step, data.get("seq")] = [1, e2e, received]
        else:
            message[0] += 1
            if e2e > message[1]:
                message[1] = e2e

    def gap(self, event: dict[str, Any]) -> None:
        missed = event["to"] - event["from"] + 1
        if missed > 0:
            self._counts(self.last_step).missed += missed

    def reconnecting(self, error: BaseException) -> None:
        counts = self._counts(self.last_step)
        counts.reconnects += 1
        if isinstance(error, Churned):
            counts.churned += 1
        if self.on_reconnect is not None:
            self.on_reconnect(error)

    def take(self) -> dict[str, Any]:
        """Everything since the last call, as a msgpack-friendly report for the master."""
        report = {
            "steps": [[step, counts.to_wire()] for step, counts in self._steps.items()],
            "first": [[step, seq, first] for (step, seq), (_, _, first) in self._messages.items()],
            "established": self.established,
            "channels": self._new_channels,
            "cpu_seconds": cpu_seconds(self._pid),
            "cpu_wait": run_queue_wait(self._pid),
            "time": time.time(),
        }
        self._steps = {}
        self._new_channels = []
        if self.on_message is not None:
            for count, worst, _ in self._messages.values():
                self.on_message(worst, int(count))
        self._messages = {}
        return report


@dataclass
class NodeState:
    established: int = 0
    cpu_seconds: float | None = None
    cpu_wait: float | None = None
    time: float = 0.0


class StepBook:
    """The master's merged view: deliveries per step from every process, and what was sent."""

    def __init__(self) -> None:
        self.steps: dict[int, StepCounts] = {}
        self.probe: dict[int, StepCounts] = {}
        self.nodes: dict[str, NodeState] = {}
        self.channels: list[str] = []
        self.first: dict[tuple[int, int], float] = {}
        """(step, seq): when the message's first delivery arrived, at any subscriber."""

    def step(self, step: int) -> StepCounts:
        return self.steps.setdefault(step, StepCounts())

    def probe_step(self, step: int) -> StepCounts:
        return self.probe.setdefault(step, StepCounts())

    def merge(self, node: str, report: dict[str, Any]) -> None:
        for step, wire in report["steps"]:
            self.step(step).merge(StepCounts.from_wire(wire))
        for step, seq, first in report["first"]:
            if first < self.first.get((step, seq), math.inf):
                self.first[step, seq] = first
        self.channels.extend(report["channels"])
        self.nodes[node] = NodeState(
            report["established"], report["cpu_seconds"], report["cpu_wait"], report["time"]
        )

    def established(self) -> int:
        return sum(node.established for node in self.nodes.values())
