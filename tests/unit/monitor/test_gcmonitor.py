"""The full collection after a flood (`GcMonitor.drained`): once, when the channels held have
fallen to a quarter of their peak and stopped falling; never for a small peak or under load."""

from __future__ import annotations

import gc

from pushserver.monitor.gcmonitor import FLOOD, GcMonitor


def collections_run(samples: list[int]) -> list[int]:
    """The samples at which `drained` ran a full collection, as the collector counts them."""
    monitor = GcMonitor(lambda generation, seconds: None)
    ran = []
    for held in samples:
        before = gc.get_stats()[2]["collections"]
        if monitor.drained(held):
            ran.append(held)
            assert gc.get_stats()[2]["collections"] == before + 1
    return ran


def test_a_flood_is_collected_after_once_its_channels_stop_falling() -> None:
    peak = 48 * FLOOD
    assert collections_run([0, peak // 2, peak, peak // 2, peak // 8, 1000, 12, 12, 12]) == [12]


def test_a_flood_that_levels_off_at_a_quarter_of_its_peak_is_collected_there() -> None:
    peak = 8 * FLOOD
    assert collections_run([peak, peak // 4, peak // 4, peak // 4]) == [peak // 4]


def test_nothing_is_collected_for_a_small_peak_or_while_much_is_held() -> None:
    assert collections_run([FLOOD - 1, 0, 0, 0]) == []
    assert collections_run([8 * FLOOD, 3 * FLOOD, 3 * FLOOD, 3 * FLOOD]) == []


def test_the_next_flood_is_measured_from_what_was_left() -> None:
    assert collections_run([4 * FLOOD, 0, 0, 0, 4 * FLOOD, 10, 10]) == [0, 10]
