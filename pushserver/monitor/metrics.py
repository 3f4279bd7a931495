"""Prometheus metrics. Hot-path counters are plain ints in the hub, read at scrape time by a
collector, so fan-out pays nothing for them; so is the fan-out's latency histogram (counted by
bucket in the hub, `core.ages`). Only the collector's pauses are observed as they happen."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ..core.ages import Ages
from ..core.hub import Hub

GC_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

Counts = tuple[Sequence[str], Mapping[str, int]]
"""The transports' names, and the connections held by transport (kept by the web layer, which
admits them), read at each scrape."""


class AgesCollector(Collector):
    """A histogram of `Ages` counted by the hub, in the samples a labelled prometheus-client
    `Histogram` gives: its buckets, count and sum, and its `_created` gauge unless
    `PROMETHEUS_DISABLE_CREATED_SERIES` turns those off (the library's documented switch)."""

    def __init__(self, name: str, doc: str, ages: Ages, labels: dict[str, str]) -> None:
        self.name, self.doc, self.ages, self.labels = name, doc, ages, labels
        created = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False")
        self.created = None if created.lower() in ("true", "1", "t") else time.time()

    def collect(self) -> Iterator:
        names, values = list(self.labels), list(self.labels.values())
        histogram = HistogramMetricFamily(self.name, self.doc, labels=names)
        buckets = [(floatToGoString(b), n) for b, n in self.ages.cumulative()]
        histogram.add_metric(values, buckets, self.ages.total)
        yield histogram
        if self.created is not None:
            created = GaugeMetricFamily(f"{self.name}_created", self.doc, labels=names)
            created.add_metric(values, self.created)
            yield created


class HubCollector(Collector):
    def __init__(
        self,
        hub: Hub,
        connections: Counts,
        labels: dict[str, str],
        extra: Callable[[], dict[str, float]],
    ):
        self.hub = hub
        self.connections = connections
        self.labels = labels
        self.extra = extra

    def _family(self, cls, name: str, doc: str, label: str | None = None):
        names = [*self.labels, label] if label else list(self.labels)
        return cls(name, doc, labels=names)

    def collect(self) -> Iterator:
        hub, base = self.hub, list(self.labels.values())
        conns = self._family(
            GaugeMetricFamily, "pushserver_connections", "Held subscriber connections", "transport"
        )
        transports, counts = self.connections
        for t in transports:
            conns.add_metric([*base, t], counts.get(t, 0))
        yield conns
        channels = self._family(GaugeMetricFamily, "pushserver_channels", "Channels held")
        channels.add_metric(base, len(hub.broker.history))
        yield channels
        tally = hub.broker.history.tally
        held = self._family(
            GaugeMetricFamily, "pushserver_history_bytes", "Bytes of messages held in histories"
        )
        held.add_metric(base, tally.bytes)
        yield held
        kept = self._family(
            GaugeMetricFamily, "pushserver_history_messages", "Messages held in histories"
        )
        kept.add_metric(base, tally.messages)
        yield kept
        published = self._family(
            CounterMetricFamily, "pushserver_messages_published", "Messages published"
        )
        published.add_metric(base, hub.stats.messages_in)
        yield published
        delivered = self._family(
            CounterMetricFamily,
            "pushserver_messages_delivered",
            "Message deliveries written to subscribers",
            "transport",
        )
        for t in transports:
            delivered.add_metric([*base, t], hub.stats.delivered[t])
        yield delivered
        disconnects = self._family(
            CounterMetricFamily,
            "pushserver_disconnects",
            "Subscriber disconnects by reason",
            "reason",
        )
        for reason, n in sorted(hub.stats.disconnects.items()):
            disconnects.add_metric([*base, reason], n)
        yield disconnects
        limits = self._family(
            CounterMetricFamily, "pushserver_limit_hits", "Requests refused by a limit", "limit"
        )
        for limit, n in sorted(hub.stats.limits_hit.items()):
            limits.add_metric([*base, limit], n)
        yield limits
        for key, value in self.extra().items():
            gauge = self._family(GaugeMetricFamily, f"pushserver_{key}", key.replace("_", " "))
            gauge.add_metric(base, value)
            yield gauge


class Metrics:
    """One registry per server, so several servers in one process never collide."""

    def __init__(
        self,
        hub: Hub,
        connections: Counts,
        worker: int,
        extra: Callable[[], dict[str, float]],
    ) -> None:
        labels = {"worker": str(worker)}
        self.registry = CollectorRegistry()
        self.registry.register(
            AgesCollector(
                "pushserver_publish_to_write_seconds",
                "Time from publish to the last subscriber write of a fan-out",
                hub.stats.fanout_ages,
                labels,
            )
        )
        self.gc_pause = Histogram(
            "pushserver_gc_pause_seconds",
            "Cyclic garbage collector pauses",
            labelnames=[*labels, "generation"],
            buckets=GC_BUCKETS,
            registry=self.registry,
        )
        self._gc_children = [self.gc_pause.labels(*labels.values(), str(g)) for g in range(3)]
        self.registry.register(HubCollector(hub, connections, labels, extra))

    def observe_gc(self, generation: int, seconds: float) -> None:
        self._gc_children[generation].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
