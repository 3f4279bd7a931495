"""The fan-out's histogram, collected from the hub's counts at scrape time, against the
prometheus-client `Histogram` it replaced: the same exposition, byte for byte."""

from __future__ import annotations

import random
import re
from bisect import bisect_left

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from pushserver.core.ages import FANOUT_AGE_BOUNDS, Ages
from pushserver.monitor.metrics import AgesCollector

NAME, DOC = "pushserver_publish_to_write_seconds", "Time from publish to the last write"
LABELS = {"worker": "3"}


def exposed(seen: list[float]) -> tuple[bytes, bytes]:
    """What a labelled `Histogram` that observed `seen` exposes, and what `AgesCollector` does
    over `Ages` counted as the fan-out counts them; `_created`'s time blanked in both."""
    reference, ours = CollectorRegistry(), CollectorRegistry()
    histogram = Histogram(
        NAME, DOC, labelnames=list(LABELS), buckets=FANOUT_AGE_BOUNDS, registry=reference
    ).labels(**LABELS)
    ages = Ages(FANOUT_AGE_BOUNDS)
    ours.register(AgesCollector(NAME, DOC, ages, LABELS))
    for age in seen:
        histogram.observe(age)
        ages.counts[bisect_left(ages.bounds, age)] += 1
        ages.total += age
    blank = re.compile(rb"^(\S+_created\{[^}]*\}) \S+$", re.MULTILINE)
    first, second = (blank.sub(rb"\1 T", generate_latest(r)) for r in (reference, ours))
    return first, second


def test_nothing_observed_is_exposed_as_the_histogram_did():
    reference, ours = exposed([])
    assert ours == reference and b"_created{" in ours and b'le="+Inf",worker="3"} 0.0' in ours


def test_ages_on_and_between_every_bound_are_exposed_as_the_histogram_did():
    rng = random.Random(35)
    seen = [*FANOUT_AGE_BOUNDS, 0.0, -0.001, 7.5, 1e9]
    seen += [rng.uniform(0, 6) for _ in range(500)] + [rng.expovariate(300) for _ in range(500)]
    seen += [b * (1 + d) for b in FANOUT_AGE_BOUNDS for d in (1e-12, -1e-12)]
    rng.shuffle(seen)
    reference, ours = exposed(seen)
    assert ours == reference
    assert f'{NAME}_count{{worker="3"}} {float(len(seen))}'.encode() in ours


def test_created_series_follow_the_librarys_switch(monkeypatch):
    monkeypatch.setenv("PROMETHEUS_DISABLE_CREATED_SERIES", "True")
    prometheus_client.disable_created_metrics()
    try:
        reference, ours = exposed([0.3, 0.002])
    finally:
        prometheus_client.enable_created_metrics()
    assert ours == reference and b"_created" not in ours


@pytest.mark.parametrize("value", ["false", "0", ""])
def test_created_series_stay_unless_switched_off(monkeypatch, value):
    monkeypatch.setenv("PROMETHEUS_DISABLE_CREATED_SERIES", value)
    reference, ours = exposed([0.3])
    assert ours == reference and b"_created{" in ours
