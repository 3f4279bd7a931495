"""The burn-in's latency histograms (HdrHistogram, batched) and their merging across
processes, the per-second windows, and how --churn shares its drops."""

from __future__ import annotations

import random

import pytest
from hdrh.histogram import HdrHistogram

from pushserver_burnin.churn import drop, share
from pushserver_burnin.histogram import Latencies, bucketed, new_hdr
from pushserver_burnin.tally import StepCounts


def samples(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(-5, 1.5) for _ in range(n)]  # ~7 ms median, long tail


def test_batched_recording_is_the_histogram_of_every_sample() -> None:
    values = samples(1, 20_000)
    one_by_one = new_hdr()
    for value in values:
        one_by_one.record_value(min(max(round(value * 1e6), 1), 3600 * 10**6))
    latencies = Latencies()
    for value in values:
        latencies.add(value)
    summary = latencies.summary()
    for name, percent in (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 99.9)):
        expected = min(one_by_one.get_value_at_percentile(percent) / 1e6, max(values))
        assert summary[name] == pytest.approx(expected), name
    assert summary["count"] == 20_000 and summary["worst"] == max(values)
    assert summary["mean"] == pytest.approx(sum(values) / len(values))


def test_the_encoded_histogram_is_hdrhistograms_own_form() -> None:
    latencies = Latencies()
    for value in samples(2, 5_000):
        latencies.add(value)
    encoded = latencies.summary()["hdr"]
    decoded = HdrHistogram.decode(encoded.encode("ascii"))  # as any HdrHistogram reader does
    assert decoded.get_total_count() == 5_000
    assert decoded.get_value_at_percentile(99) / 1e6 == pytest.approx(
        latencies.summary()["p99"], rel=1e-3
    )


def test_histograms_merged_across_processes_equal_one_that_saw_everything() -> None:
    everything, merged = Latencies(), Latencies()
    for seed in (3, 4, 5):
        worker = Latencies()
        for value in samples(seed, 3_000):
            worker.add(value)
            everything.add(value)
        merged.merge(Latencies.from_wire(worker.to_wire()))  # as the master gets it
    assert merged.summary() == pytest.approx(everything.summary())


def test_rounding_keeps_each_value_in_its_bucket() -> None:
    hdr = new_hdr()
    values, _ = bucketed([1e-6, 0.0020471, 0.0020489, 0.5, 7.25, 99999.0])
    originals = [1, 2047, 2049, 500_000, 7_250_000, 3600 * 10**6]
    for original, rounded in zip(originals, values, strict=True):
        assert hdr.get_lowest_equivalent_value(original) == rounded


def test_windows_sort_deliveries_by_the_second_they_arrived_in() -> None:
    counts = StepCounts()
    for arrived, latency in ((100.2, 0.01), (100.9, 0.03), (101.1, 0.5), (103.0, 0.2)):
        counts.e2e.pending.append(latency)
        counts.arrivals.append(arrived)
    merged = StepCounts()
    merged.merge(StepCounts.from_wire(counts.to_wire()))
    rows = merged.timeline()
    assert [(row[0], row[1], row[-1]) for row in rows] == [
        (100, 2, 0.03),
        (101, 1, 0.5),
        (103, 1, 0.2),
    ]
    assert merged.all_e2e().summary()["count"] == 4


def test_churn_is_shared_in_proportion_to_the_subscribers_held() -> None:
    assert share(10, {"a": 300, "b": 100}) == {"a": 8, "b": 2}
    assert share(3, {"a": 1, "b": 1}) == {"a": 1, "b": 1}  # never more than are held
    assert sum(share(7, {"a": 5, "b": 5, "c": 5}).values()) == 7
    assert share(5, {}) == {} and share(0, {"a": 9}) == {}


class Held:
    def __init__(self, connected: bool) -> None:
        self.connected = connected
        self.dropped = 0

    def drop(self) -> bool:
        self.dropped += self.connected
        return self.connected


def test_a_drop_picks_distinct_subscribers_and_counts_only_connected_ones() -> None:
    crowd = [Held(True) for _ in range(8)] + [Held(False) for _ in range(2)]
    done = drop(crowd, 10)
    assert done == 8 and all(h.dropped == 1 for h in crowd[:8])
